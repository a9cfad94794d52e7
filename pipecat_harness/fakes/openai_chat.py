"""OpenAI-compatible chat completions on loopback, for ``OpenAILLMService(base_url=...)`` and the proxy.

``POST /v1/chat/completions`` with ``stream: true`` answers a server-sent-event stream of ``chat.completion.chunk``
objects: a role delta, content deltas, one delta per tool call (``index``, ``id``, name, then the JSON arguments), a
final chunk with ``finish_reason`` (``tool_calls`` or ``stop``), a usage chunk when ``stream_options.include_usage``
asks for it, and ``[DONE]``. Without ``stream`` the same reply comes back as one ``chat.completion``.

What the fake accepts is that of a named server (:data:`SERVERS`). The default, ``strict``, accepts only what every
common OpenAI-compatible server accepts and answers anything else with a 400 naming the message: content parts only in
user messages, ``content`` a string everywhere else (``null`` and a missing content refused, even beside
``tool_calls``), the roles ``system``, ``user``, ``assistant`` and ``tool``, ``response_format`` of ``text`` or
``json_object``. ``openai`` accepts what OpenAI accepts (``developer``, parts anywhere, ``null`` content beside tool
calls, JSON schemas). ``llama-cpp-python`` answers as that server's 0.3 releases do: a refused request is a 500, an
assistant tool-call message without content a 200 with an empty body, and a stream never carries usage.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from aiohttp import web

from pipecat_harness.fakes.chat import ChatModel, ChatReply, ChatRequest, as_chat_model
from pipecat_harness.fakes.server import LoopbackServer
from pipecat_harness.fakes.speech import text_pieces

__all__ = ["SERVERS", "OpenAIChatFake", "openai_to_chat_messages", "refusal"]

#: The servers whose acceptance the fake can take.
SERVERS = ("strict", "openai", "llama-cpp-python")

_STRICT_ROLES = frozenset({"system", "user", "assistant", "tool"})
_OPENAI_ROLES = _STRICT_ROLES | {"developer", "function"}
_LLAMA_CPP_ROLES = _STRICT_ROLES | {"function"}
_USER_PART_TYPES = frozenset({"text", "image_url"})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def openai_to_chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, with ``developer`` read as ``system`` and tool messages named."""
    names: dict[str, str] = {}
    messages = []
    for message in body.get("messages") or []:
        role = message.get("role")
        for call in message.get("tool_calls") or []:
            names[str(call.get("id"))] = str(call.get("function", {}).get("name", ""))
        converted = {**message, "role": "system" if role == "developer" else role}
        if role == "tool":
            converted["name"] = names.get(str(message.get("tool_call_id")), "")
        if "content" in message and not isinstance(message.get("content"), str):
            converted["content"] = _text(message.get("content"))
        messages.append(converted)
    return messages


def _message_refusal(index: int, message: Any, server: str) -> str | None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        return f"{where} must be an object"
    role = message.get("role")
    roles = {"strict": _STRICT_ROLES, "openai": _OPENAI_ROLES, "llama-cpp-python": _LLAMA_CPP_ROLES}[server]
    if role not in roles:
        return f"{where}.role {role!r} is not one of {sorted(roles)}"
    content = message.get("content")
    if server == "openai":
        if content is None and not (role == "assistant" and (message.get("tool_calls") or "content" not in message)):
            return f"{where}.content must not be null"
        return None
    if role == "user" and isinstance(content, list):
        kinds = {part.get("type") if isinstance(part, dict) else None for part in content}
        if kinds <= _USER_PART_TYPES:
            return None
        return f"{where}.content has a part type outside {sorted(_USER_PART_TYPES)}"
    if server == "llama-cpp-python" and role == "assistant" and "content" not in message:
        return None  # accepted, then answered with an empty body
    if server == "llama-cpp-python" and role == "tool" and content is None:
        return None
    if not isinstance(content, str):
        return f"{where}.content must be a string for role {role!r} (got {type(content).__name__})"
    return None


def refusal(body: Any, server: str = "strict") -> str | None:
    """Why ``server`` would refuse this chat-completions body (``None``: it accepts it)."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages must be a list"
    for index, message in enumerate(messages):
        reason = _message_refusal(index, message, server)
        if reason is not None:
            return reason
    response_format = body.get("response_format")
    if server != "openai" and isinstance(response_format, dict) and response_format.get("type") not in (
            "text", "json_object"):
        return f"response_format.type {response_format.get('type')!r} is not 'text' or 'json_object'"
    return None


def _empty_body_quirk(body: dict[str, Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "assistant" and "content" not in m
               for m in body.get("messages") or [])


class OpenAIChatFake(LoopbackServer):
    """An OpenAI-compatible chat completions API on 127.0.0.1 answering from a :class:`ChatModel`.

    Point a client at ``fake.base_url`` (``http://127.0.0.1:<port>/v1``).

    Args:
        model: Decides each reply (a :class:`ChatModel`, a function of the request, or replies in order).
        server: Whose acceptance to take (one of :data:`SERVERS`; default the strict common subset).
        **kwargs: Passed to :class:`LoopbackServer`.
    """

    def __init__(self, model: Any, *, server: str = "strict", **kwargs: Any) -> None:
        if server not in SERVERS:
            raise ValueError(f"server {server!r} is not one of {list(SERVERS)}")
        super().__init__("openai", **kwargs)
        self.model: ChatModel = as_chat_model(model)
        self.server = server
        self.requests: list[ChatRequest] = []
        self.refused: list[str] = []

    @property
    def base_url(self) -> str:
        """The API root to give the client (ends in ``/v1``)."""
        return f"http://{self.host}/v1"

    def routes(self, app: web.Application) -> None:
        """``POST /v1/chat/completions``."""
        app.router.add_post("/v1/chat/completions", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "invalid JSON body", "type": "invalid_request_error"}},
                                     status=400)
        self.record("received", "request", body)
        reason = refusal(body, self.server)
        if reason is not None:
            self.refused.append(reason)
            status = 500 if self.server == "llama-cpp-python" else 400
            kind = "internal_server_error" if status == 500 else "invalid_request_error"
            return web.json_response({"error": {"message": reason, "type": kind, "param": None, "code": None}},
                                     status=status)
        if self.server == "llama-cpp-python" and body.get("stream") and _empty_body_quirk(body):
            self.refused.append("assistant message without content")
            return web.Response(status=200, content_type="text/event-stream")
        tools = [str(t.get("function", {}).get("name", "")) for t in body.get("tools") or []]
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        chat = ChatRequest(provider="openai", model=str(body.get("model", "")),
                           messages=openai_to_chat_messages(body), tools=tools, raw=body,
                           streaming=bool(body.get("stream")), max_tokens=limit if isinstance(limit, int) else None)
        self.requests.append(chat)
        reply = await self.model.reply(chat)
        if not body.get("stream"):
            return self._whole(chat, reply)
        usage = bool((body.get("stream_options") or {}).get("include_usage")) and self.server != "llama-cpp-python"
        return await self._stream(request, chat, reply, usage)

    @staticmethod
    def _usage(chat: ChatRequest, reply: ChatReply) -> dict[str, int]:
        prompt = sum(len(str(m.get("content") or "").split()) for m in chat.messages)
        output = len(reply.text.split()) + 5 * len(reply.tool_calls)
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}

    @staticmethod
    def _tool_calls(reply: ChatReply) -> list[dict[str, Any]]:
        return [{"id": call.get("id") or f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                 "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments") or {})}}
                for call in reply.tool_calls]

    def _whole(self, chat: ChatRequest, reply: ChatReply) -> web.Response:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls(reply)
        body = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                "model": chat.model, "usage": self._usage(chat, reply),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if reply.tool_calls else "stop"}]}
        self.record("sent", "response", body)
        reply.sent_text, reply.completed = reply.text, True
        return web.json_response(body)

    async def _stream(self, request: web.Request, chat: ChatRequest, reply: ChatReply,
                      include_usage: bool) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": chat.model}

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            chunk = {**base, "choices": choices, **extra}
            self.record("sent", "chunk", chunk)
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        async for piece in text_pieces(reply):
            await send([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
            reply.sent_text += piece
        for index, call in enumerate(self._tool_calls(reply)):
            await send([{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
                {"index": index, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": ""}}]}}])
            await send([{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": call["function"]["arguments"]}}]}}])
        await send([{"index": 0, "delta": {}, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}])
        if include_usage:
            await send([], usage=self._usage(chat, reply))
        await response.write(b"data: [DONE]\n\n")
        reply.completed = True
        await response.write_eof()
        return response
