"""Upstream: Gemini through google-genai, streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from pipecat_harness.checklist.prompt import content_text
from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest

__all__ = ["GeminiUpstream", "to_gemini_contents"]

_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


def _text(content: Any) -> str:
    return content_text(content) if content is None or isinstance(content, str | list) else json.dumps(content)


def to_gemini_contents(messages: list[dict[str, Any]]) -> list[Any]:
    """Convert OpenAI-shaped messages (no system messages) to Gemini ``Content`` objects."""
    from google.genai import types

    names: dict[str, str] = {}
    contents: list[Any] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            parts = [types.Part(text=_text(message["content"]))] if message.get("content") else []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                names[str(call.get("id"))] = str(function.get("name"))
                try:
                    args = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    args = {"raw": function.get("arguments")}
                function_call = types.FunctionCall(id=call.get("id"), name=function.get("name"), args=args)
                parts.append(types.Part(function_call=function_call))
            if parts:
                contents.append(types.Content(role="model", parts=parts))
        elif role in ("tool", "function"):
            call_id = str(message.get("tool_call_id", ""))
            name = names.get(call_id) or str(message.get("name") or "tool")
            result = {"result": _text(message.get("content"))}
            response = types.FunctionResponse(id=call_id or None, name=name, response=result)
            contents.append(types.Content(role="user", parts=[types.Part(function_response=response)]))
        else:
            text = _text(message.get("content"))
            if text:
                contents.append(types.Content(role="user", parts=[types.Part(text=text)]))
    return contents


class GeminiUpstream(Upstream):
    """Streams from Gemini; the system prompt is two ``system_instruction`` parts, the stable (cacheable) base first.

    Args:
        client: A ``google.genai.Client`` (or an object with the same ``aio.models`` API).
        model: Gemini model name.
    """

    name = "gemini"

    def __init__(self, client: Any = None, *, model: str = "gemini-2.5-flash") -> None:
        if client is None:
            from pipecat_harness.errors import gemini_client

            client = gemini_client("the Gemini upstream (--upstream gemini)", "use --upstream scripted or openai")
        self.client = client
        self.model = model

    def _config(self, request: UpstreamRequest) -> Any:
        from google.genai import types

        functions = [tool["function"] for tool in request.tools
                     if tool.get("type", "function") == "function" and "function" in tool]
        declarations = [types.FunctionDeclaration(
            name=f["name"], description=f.get("description", ""),
            parameters_json_schema=f.get("parameters") or {"type": "object", "properties": {}}) for f in functions]
        tools: list[Any] | None = [types.Tool(function_declarations=declarations)] if request.tools else None
        return types.GenerateContentConfig(
            system_instruction=types.Content(parts=[types.Part(text=block) for block in request.system.blocks()]),
            temperature=request.temperature, max_output_tokens=request.max_tokens, tools=tools,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True) if tools else None)

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the answer; function calls become whole tool-call deltas."""
        calls = 0
        finish: str | None = None
        try:
            responses = await self.client.aio.models.generate_content_stream(
                model=self.model, contents=to_gemini_contents(request.messages), config=self._config(request)
            )
            async for response in responses:
                for candidate in response.candidates or []:
                    parts = candidate.content.parts if candidate.content and candidate.content.parts else []
                    for part in parts:
                        if part.function_call is not None:
                            call = part.function_call
                            delta = ToolCallDelta(calls, call.id or f"call_{calls}", call.name,
                                                  json.dumps(dict(call.args or {})))
                            calls += 1
                            yield UpstreamChunk(tool_calls=(delta,))
                        elif part.text and not part.thought:
                            yield UpstreamChunk(text=part.text)
                    if candidate.finish_reason is not None:
                        reason = getattr(candidate.finish_reason, "value", str(candidate.finish_reason))
                        finish = _FINISH.get(reason, "stop")
        except Exception as exc:
            raise UpstreamError(f"Gemini upstream failed: {type(exc).__name__}: {exc}") from exc
        yield UpstreamChunk(finish_reason="tool_calls" if calls else (finish or "stop"))
