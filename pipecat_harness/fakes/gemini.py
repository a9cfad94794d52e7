"""Gemini ``streamGenerateContent`` on loopback, for ``GoogleLLMService(http_options=...)``.

The stream is text deltas, then every function call of the turn in one chunk (Pipecat runs them in parallel), then the
finish with usage; ``:generateContent`` answers the same in one response. In the :class:`ChatRequest`, only the system
instruction is a system message (a directive the adapter turned into a user turn is a user message).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from pipecat_harness.fakes.chat import ChatReply, ChatRequest
from pipecat_harness.fakes.server import ModelServer
from pipecat_harness.fakes.speech import text_pieces

__all__ = ["GeminiFake", "gemini_to_chat_messages"]


def _get(mapping: dict[str, Any], camel: str, snake: str) -> Any:
    return mapping.get(camel, mapping.get(snake))


def _parts_text(parts: list[dict[str, Any]]) -> str:
    return "".join(str(p.get("text") or "") for p in parts if "text" in p and not p.get("thought"))


def gemini_to_chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages of a Gemini request body (system instruction first)."""
    system = _get(body, "systemInstruction", "system_instruction")
    text = _parts_text(system.get("parts") or []) if isinstance(system, dict) else system
    messages: list[dict[str, Any]] = [{"role": "system", "content": text}] if text and isinstance(text, str) else []
    calls = 0
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        text = _parts_text(parts)
        if content.get("role") == "model":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            tool_calls = []
            for call in filter(None, (_get(p, "functionCall", "function_call") for p in parts)):
                calls += 1
                function = {"name": call.get("name", ""), "arguments": json.dumps(call.get("args") or {})}
                call_id = call.get("id") or f"gemini_call_{calls}"
                tool_calls.append({"id": call_id, "type": "function", "function": function})
            if tool_calls:
                message["tool_calls"] = tool_calls
            messages.append(message)
            continue
        responses = [r for p in parts if (r := _get(p, "functionResponse", "function_response"))]
        for response in responses:
            result = response.get("response")
            messages.append({"role": "tool", "name": response.get("name", ""), "tool_call_id": response.get("id", ""),
                             "content": result if isinstance(result, str) else json.dumps(result)})
        if text or not responses:
            messages.append({"role": "user", "content": text})
    return messages


def _chunk(model_name: str, response_id: str, parts: list[dict[str, Any]], usage: dict[str, int] | None = None) -> Any:
    """A response chunk; the one with usage is the last (it carries the finish reason)."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model_name, "responseId": response_id}
    if usage is not None:
        candidate["finishReason"] = "STOP"
        chunk["usageMetadata"] = usage
    return chunk


class GeminiFake(ModelServer):
    """A Gemini API on 127.0.0.1, for ``GoogleLLMService(api_key=..., http_options=fake.http_options())``."""

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__("gemini", model, **kwargs)

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
            error = {"code": 400, "message": "invalid JSON body", "status": "INVALID_ARGUMENT"}
            return web.json_response({"error": error}, status=400)
        self.record("received", "request", body)
        limit = _get(_get(body, "generationConfig", "generation_config") or {}, "maxOutputTokens", "max_output_tokens")
        tools = [str(declaration.get("name", "")) for tool in body.get("tools") or []
                 for declaration in _get(tool, "functionDeclarations", "function_declarations") or []]
        streaming, limit = method == "streamGenerateContent", limit if isinstance(limit, int) else None
        chat = ChatRequest("gemini", model_name, gemini_to_chat_messages(body), tools, body, streaming, limit)
        reply = await self.answer(chat)
        if method == "generateContent":
            return self._whole(reply, model_name)
        if method != "streamGenerateContent":
            error = {"code": 404, "message": f"unknown method {method!r}", "status": "NOT_FOUND"}
            return web.json_response({"error": error}, status=404)
        return await self._stream(request, reply, model_name, chat)

    def _usage(self, chat: ChatRequest | None, reply: ChatReply) -> dict[str, int]:
        prompt, output = self.token_counts(chat, reply)
        return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output}

    @staticmethod
    def _call_parts(reply: ChatReply) -> list[dict[str, Any]]:
        return [{"functionCall": {"id": call.get("id") or uuid.uuid4().hex[:12], "name": call["name"],
                                  "args": call.get("arguments") or {}}} for call in reply.tool_calls]

    def _whole(self, reply: ChatReply, model_name: str) -> web.Response:
        parts = ([{"text": reply.text}] if reply.text else []) + self._call_parts(reply)
        chunk = _chunk(model_name, uuid.uuid4().hex, parts, self._usage(None, reply))
        self.record("sent", "response", chunk)
        reply.sent_text, reply.completed = reply.text, True
        return web.json_response(chunk)

    async def _stream(self, request: web.Request, reply: ChatReply, model_name: str, chat: ChatRequest) -> Any:
        response = await self.event_stream(request)
        response_id = uuid.uuid4().hex

        async def send(parts: list[dict[str, Any]], usage: dict[str, int] | None = None) -> None:
            chunk = _chunk(model_name, response_id, parts, usage)
            self.record("sent", "chunk", chunk)
            await response.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())

        async for piece in text_pieces(reply):
            await send([{"text": piece}])
            reply.sent_text += piece
        if reply.tool_calls:
            await send(self._call_parts(reply))
        await send([], self._usage(chat, reply))
        reply.completed = True
        await response.write_eof()
        return response
