"""Gemini ``streamGenerateContent`` on loopback, for ``GoogleLLMService(http_options=...)``.

It speaks the REST protocol the google-genai SDK uses: ``POST /{version}/models/{model}:streamGenerateContent?alt=sse``
with the request's ``contents`` (``user``/``model`` turns of ``text``, ``functionCall`` and ``functionResponse`` parts),
``systemInstruction`` and ``tools``; the answer is a server-sent-event stream of ``GenerateContentResponse`` chunks:
text deltas, then every function call of the turn as parts of one chunk (Pipecat runs them in parallel), then
``finishReason`` with ``usageMetadata``. ``:generateContent`` answers the same reply in one response.

The reply is decided from the request converted to :class:`ChatRequest`: what Gemini would have read as system
instruction is the leading system message; anything else, including a directive the adapter turned into a user turn, is
a user message.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from pipecat_harness.fakes.chat import ChatModel, ChatReply, ChatRequest, as_chat_model
from pipecat_harness.fakes.server import LoopbackServer
from pipecat_harness.fakes.speech import text_pieces

__all__ = ["GeminiFake", "gemini_to_chat_messages"]


def _get(mapping: dict[str, Any], camel: str, snake: str) -> Any:
    return mapping.get(camel, mapping.get(snake))


def _parts_text(parts: list[dict[str, Any]]) -> str:
    return "".join(str(p.get("text") or "") for p in parts if "text" in p and not p.get("thought"))


def gemini_to_chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages of a Gemini request body (system instruction first)."""
    messages: list[dict[str, Any]] = []
    system = _get(body, "systemInstruction", "system_instruction")
    if isinstance(system, dict):
        text = _parts_text(system.get("parts") or [])
        if text:
            messages.append({"role": "system", "content": text})
    elif isinstance(system, str) and system:
        messages.append({"role": "system", "content": system})
    calls = 0
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        role = content.get("role") or "user"
        text = _parts_text(parts)
        function_calls = [_get(p, "functionCall", "function_call") for p in parts]
        function_calls = [c for c in function_calls if c]
        responses = [_get(p, "functionResponse", "function_response") for p in parts]
        responses = [r for r in responses if r]
        if role == "model":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if function_calls:
                tool_calls = []
                for call in function_calls:
                    calls += 1
                    tool_calls.append({"id": call.get("id") or f"gemini_call_{calls}", "type": "function",
                                       "function": {"name": call.get("name", ""),
                                                    "arguments": json.dumps(call.get("args") or {})}})
                message["tool_calls"] = tool_calls
            messages.append(message)
            continue
        for response in responses:
            result = response.get("response")
            messages.append({"role": "tool", "name": response.get("name", ""), "tool_call_id": response.get("id", ""),
                             "content": json.dumps(result) if not isinstance(result, str) else result})
        if text or not responses:
            messages.append({"role": "user", "content": text})
    return messages


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        for declaration in _get(tool, "functionDeclarations", "function_declarations") or []:
            names.append(str(declaration.get("name", "")))
    return names


class GeminiFake(LoopbackServer):
    """A Gemini API on 127.0.0.1 answering from a :class:`ChatModel`.

    Point Pipecat at it with ``GoogleLLMService(api_key=..., http_options=fake.http_options())``.

    Args:
        model: Decides each reply (a :class:`ChatModel`, a function of the request, or replies in order).
        **kwargs: Passed to :class:`LoopbackServer`.
    """

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__("gemini", **kwargs)
        self.model: ChatModel = as_chat_model(model)
        self.requests: list[ChatRequest] = []

    @property
    def base_url(self) -> str:
        """The API root to give the SDK."""
        return f"http://{self.host}"

    def http_options(self) -> Any:
        """``google.genai.types.HttpOptions`` pointing at this fake."""
        from google.genai.types import HttpOptions

        return HttpOptions(base_url=self.base_url, api_version="v1beta")

    def routes(self, app: web.Application) -> None:
        """``POST /{version}/models/{model}:streamGenerateContent`` and ``:generateContent``."""
        app.router.add_post("/{version}/models/{call}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        model_name, _, method = request.match_info["call"].partition(":")
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"code": 400, "message": "invalid JSON body",
                                                "status": "INVALID_ARGUMENT"}}, status=400)
        self.record("received", "request", body)
        config = _get(body, "generationConfig", "generation_config") or {}
        limit = _get(config, "maxOutputTokens", "max_output_tokens")
        chat = ChatRequest(provider="gemini", model=model_name, messages=gemini_to_chat_messages(body),
                           tools=_tool_names(body), raw=body, streaming=method == "streamGenerateContent",
                           max_tokens=limit if isinstance(limit, int) else None)
        self.requests.append(chat)
        reply = await self.model.reply(chat)
        if method == "generateContent":
            return await self._whole(reply, model_name)
        if method != "streamGenerateContent":
            return web.json_response({"error": {"code": 404, "message": f"unknown method {method!r}",
                                                "status": "NOT_FOUND"}}, status=404)
        return await self._stream(request, reply, model_name, chat)

    def _chunk(self, model_name: str, response_id: str, parts: list[dict[str, Any]] | None,
               finish: bool, usage: dict[str, int] | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts or []}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model_name, "responseId": response_id}
        if usage is not None:
            chunk["usageMetadata"] = usage
        return chunk

    @staticmethod
    def _usage(chat: ChatRequest | None, reply: ChatReply) -> dict[str, int]:
        prompt = sum(len(str(m.get("content") or "").split()) for m in chat.messages) if chat else 0
        output = len(reply.text.split()) + 5 * len(reply.tool_calls)
        return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output}

    @staticmethod
    def _call_parts(reply: ChatReply) -> list[dict[str, Any]]:
        return [{"functionCall": {"id": call.get("id") or uuid.uuid4().hex[:12], "name": call["name"],
                                  "args": call.get("arguments") or {}}} for call in reply.tool_calls]

    async def _whole(self, reply: ChatReply, model_name: str) -> web.Response:
        parts = ([{"text": reply.text}] if reply.text else []) + self._call_parts(reply)
        chunk = self._chunk(model_name, uuid.uuid4().hex, parts, True, self._usage(None, reply))
        self.record("sent", "response", chunk)
        reply.sent_text, reply.completed = reply.text, True
        return web.json_response(chunk)

    async def _stream(self, request: web.Request, reply: ChatReply, model_name: str,
                      chat: ChatRequest) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        response_id = uuid.uuid4().hex

        async def send(chunk: dict[str, Any]) -> None:
            self.record("sent", "chunk", chunk)
            await response.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())

        async for piece in text_pieces(reply):
            await send(self._chunk(model_name, response_id, [{"text": piece}], False))
            reply.sent_text += piece
        if reply.tool_calls:
            await send(self._chunk(model_name, response_id, self._call_parts(reply), False))
        await send(self._chunk(model_name, response_id, None, True, self._usage(chat, reply)))
        reply.completed = True
        await response.write_eof()
        return response
