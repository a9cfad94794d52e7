"""OpenAI-compatible chat completions on loopback, for ``OpenAILLMService(base_url=...)`` and the proxy.

It answers a stream of ``chat.completion.chunk`` objects, or one ``chat.completion`` without ``stream``. What it accepts
is that of a named server (:data:`SERVERS`): ``strict`` (the default) only what every common OpenAI-compatible server
accepts (content parts only in user messages, a string ``content`` everywhere else), refusing the rest with a 400 naming
the message; ``openai`` what OpenAI accepts; ``llama-cpp-python`` as its 0.3 releases do (a refusal is a 500, an
assistant message without content a 200 with an empty body, and a stream never carries usage).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from aiohttp import web

from pipecat_harness.fakes.chat import ChatReply, ChatRequest
from pipecat_harness.fakes.server import ModelServer
from pipecat_harness.fakes.speech import text_pieces

__all__ = ["SERVERS", "OpenAIChatFake", "openai_to_chat_messages", "refusal"]

#: The servers whose acceptance the fake can take.
SERVERS = ("strict", "openai", "llama-cpp-python")

_STRICT_ROLES = frozenset({"system", "user", "assistant", "tool"})
_ROLES = {"strict": _STRICT_ROLES, "openai": _STRICT_ROLES | {"developer", "function"},
          "llama-cpp-python": _STRICT_ROLES | {"function"}}
_USER_PART_TYPES = frozenset({"text", "image_url"})
_PART_TYPE_NAMES = sorted(_USER_PART_TYPES)


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
        content = message.get("content")
        if "content" in message and not isinstance(content, str):
            parts = content if isinstance(content, list) else []
            texts = (p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
            converted["content"] = " ".join(map(str, texts))
        messages.append(converted)
    return messages


def _message_refusal(index: int, message: Any, server: str) -> str | None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        return f"{where} must be an object"
    role, content = message.get("role"), message.get("content")
    if role not in _ROLES[server]:
        return f"{where}.role {role!r} is not one of {sorted(_ROLES[server])}"
    if server == "openai":
        if content is None and not (role == "assistant" and (message.get("tool_calls") or "content" not in message)):
            return f"{where}.content must not be null"
        return None
    if role == "user" and isinstance(content, list):
        kinds = {part.get("type") if isinstance(part, dict) else None for part in content}
        return None if kinds <= _USER_PART_TYPES else f"{where}.content has a part type outside {_PART_TYPE_NAMES}"
    # llama-cpp-python takes an assistant message without content (and answers it with an empty body).
    llama_takes = (role == "assistant" and "content" not in message) or (role == "tool" and content is None)
    if server == "llama-cpp-python" and llama_takes:
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
    reason = next(filter(None, (_message_refusal(i, message, server) for i, message in enumerate(messages))), None)
    if reason is not None:
        return reason
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else "text"
    if server != "openai" and kind not in ("text", "json_object"):
        return f"response_format.type {kind!r} is not 'text' or 'json_object'"
    return None


class OpenAIChatFake(ModelServer):
    """An OpenAI-compatible chat completions API on 127.0.0.1 at ``fake.base_url``, accepting what ``server`` does."""

    def __init__(self, model: Any, *, server: str = "strict", **kwargs: Any) -> None:
        if server not in SERVERS:
            raise ValueError(f"server {server!r} is not one of {list(SERVERS)}")
        super().__init__("openai", model, **kwargs)
        self.server = server
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
            invalid = {"message": "invalid JSON body", "type": "invalid_request_error"}
            return web.json_response({"error": invalid}, status=400)
        self.record("received", "request", body)
        llama = self.server == "llama-cpp-python"
        reason = refusal(body, self.server)
        if reason is not None:
            self.refused.append(reason)
            kind = "internal_server_error" if llama else "invalid_request_error"
            error = {"message": reason, "type": kind, "param": None, "code": None}
            return web.json_response({"error": error}, status=500 if llama else 400)
        messages = body["messages"]
        if llama and body.get("stream") and any(m.get("role") == "assistant" and "content" not in m for m in messages):
            self.refused.append("assistant message without content")
            return web.Response(status=200, content_type="text/event-stream")
        tools = [str(t.get("function", {}).get("name", "")) for t in body.get("tools") or []]
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        streaming, limit = bool(body.get("stream")), limit if isinstance(limit, int) else None
        model = str(body.get("model", ""))
        chat = ChatRequest("openai", model, openai_to_chat_messages(body), tools, body, streaming, limit)
        reply = await self.answer(chat)
        if not streaming:
            return self._whole(chat, reply)
        usage = bool((body.get("stream_options") or {}).get("include_usage")) and not llama
        return await self._stream(request, chat, reply, usage)

    def _usage(self, chat: ChatRequest, reply: ChatReply) -> dict[str, int]:
        prompt, output = self.token_counts(chat, reply)
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}

    @staticmethod
    def _tool_calls(reply: ChatReply) -> list[dict[str, Any]]:
        return [{"id": call.get("id") or f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                 "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments") or {})}}
                for call in reply.tool_calls]

    @staticmethod
    def _envelope(chat: ChatRequest, kind: str) -> dict[str, Any]:
        identifier = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        return {"id": identifier, "object": kind, "created": int(time.time()), "model": chat.model}

    def _whole(self, chat: ChatRequest, reply: ChatReply) -> web.Response:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls(reply)
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
        body = {**self._envelope(chat, "chat.completion"), "usage": self._usage(chat, reply), "choices": [choice]}
        self.record("sent", "response", body)
        reply.sent_text, reply.completed = reply.text, True
        return web.json_response(body)

    async def _stream(self, request: web.Request, chat: ChatRequest, reply: ChatReply, include_usage: bool) -> Any:
        response = await self.event_stream(request)
        envelope = self._envelope(chat, "chat.completion.chunk")

        async def send(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> None:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            chunk = {**envelope, "choices": choices, **extra}
            self.record("sent", "chunk", chunk)
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        async for piece in text_pieces(reply):
            await send({"content": piece})
            reply.sent_text += piece
        for index, call in enumerate(self._tool_calls(reply)):
            function = call["function"]
            opening = {"index": index, "id": call["id"], "type": "function", "function": {**function, "arguments": ""}}
            await send({"tool_calls": [opening]})
            await send({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]})
        await send({}, "tool_calls" if reply.tool_calls else "stop")
        if include_usage:
            await send(None, usage=self._usage(chat, reply))
        await response.write(b"data: [DONE]\n\n")
        reply.completed = True
        await response.write_eof()
        return response
