"""OpenAI-compatible chat completions on loopback, for ``OpenAILLMService(base_url=...)`` and the proxy.

``POST /v1/chat/completions`` with ``stream: true`` answers a server-sent-event
stream of ``chat.completion.chunk`` objects: a role delta, content deltas, one
delta per tool call (``index``, ``id``, name, then the JSON arguments), a
final chunk with ``finish_reason`` (``tool_calls`` or ``stop``), a usage
chunk when ``stream_options.include_usage`` asks for it, and ``[DONE]``.
Without ``stream`` the same reply comes back as one ``chat.completion``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from aiohttp import web

from pipecat_harness.fakes.chat import ChatModel, ChatReply, ChatRequest, as_chat_model
from pipecat_harness.fakes.server import LoopbackServer
from pipecat_harness.fakes.stream import text_pieces

__all__ = ["OpenAIChatFake", "openai_to_chat_messages"]


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


class OpenAIChatFake(LoopbackServer):
    """An OpenAI-compatible chat completions API on 127.0.0.1 answering from a :class:`ChatModel`.

    Point a client at ``fake.base_url`` (``http://127.0.0.1:<port>/v1``).

    Args:
        model: Decides each reply (a :class:`ChatModel`, a function of the request, or replies in order).
        **kwargs: Passed to :class:`LoopbackServer`.
    """

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__("openai", **kwargs)
        self.model: ChatModel = as_chat_model(model)
        self.requests: list[ChatRequest] = []

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
        tools = [str(t.get("function", {}).get("name", "")) for t in body.get("tools") or []]
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        chat = ChatRequest(provider="openai", model=str(body.get("model", "")),
                           messages=openai_to_chat_messages(body), tools=tools, raw=body,
                           streaming=bool(body.get("stream")), max_tokens=limit if isinstance(limit, int) else None)
        self.requests.append(chat)
        reply = await self.model.reply(chat)
        if not body.get("stream"):
            return self._whole(chat, reply)
        return await self._stream(request, chat, reply, bool((body.get("stream_options") or {}).get("include_usage")))

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
