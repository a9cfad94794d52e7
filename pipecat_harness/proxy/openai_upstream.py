"""Upstream: any OpenAI-compatible chat-completions endpoint, streamed over httpx.

The SSE stream is parsed directly (one ``json.loads`` per event) rather than
through a typed SDK: on the voice path every millisecond before the first
token counts, and at a hundred concurrent streams per-chunk model building
dominated the proxy's own cost.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest

__all__ = ["OpenAICompatibleUpstream", "render_openai_messages"]


def render_openai_messages(request: UpstreamRequest, *, mark_cacheable: bool = True) -> list[dict[str, Any]]:
    """The request as OpenAI messages: one system message with two text blocks first.

    The base block carries ``cache_control`` (honoured by gateways that cache
    prompt prefixes, ignored by most others) unless ``mark_cacheable`` is off.
    """
    blocks: list[dict[str, Any]] = []
    if request.system.base:
        base: dict[str, Any] = {"type": "text", "text": request.system.base}
        if mark_cacheable:
            base["cache_control"] = {"type": "ephemeral"}
        blocks.append(base)
    if request.system.directive:
        blocks.append({"type": "text", "text": request.system.directive})
    system = [{"role": "system", "content": blocks}] if blocks else []
    return system + list(request.messages)


def _tool_calls(delta: Mapping[str, Any]) -> tuple[ToolCallDelta, ...]:
    calls = []
    for call in delta.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append(
            ToolCallDelta(
                index=int(call.get("index", 0)),
                id=call.get("id"),
                name=function.get("name"),
                arguments=function.get("arguments") or "",
            )
        )
    return tuple(calls)


def _chunks(data: str) -> list[UpstreamChunk]:
    """The chunks of one SSE ``data:`` payload.

    Raises:
        UpstreamError: The payload is not a chunk object, or reports an error.
    """
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise UpstreamError(f"OpenAI-compatible upstream sent a malformed event: {data[:200]!r}") from exc
    if not isinstance(event, dict):
        raise UpstreamError(f"OpenAI-compatible upstream sent a non-object event: {data[:200]!r}")
    if event.get("error"):
        raise UpstreamError(f"OpenAI-compatible upstream reported an error: {event['error']}")
    chunks = []
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        calls = _tool_calls(delta)
        text = delta.get("content") or ""
        finish = choice.get("finish_reason")
        if text or calls or finish:
            chunks.append(UpstreamChunk(text=text, tool_calls=calls, finish_reason=finish))
    return chunks


class OpenAICompatibleUpstream(Upstream):
    """Streams from an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: Endpoint base URL (e.g. ``http://127.0.0.1:8001/v1``).
        api_key: Key sent as a bearer token.
        model: Model name; overrides the one the platform asked for when set.
        mark_cacheable: Mark the base system block cacheable.
        timeout_secs: HTTP timeout.
        extra_body: Extra JSON fields sent with every request (gateway-specific options).
        headers: Extra HTTP headers.
        client: An existing ``httpx.AsyncClient``.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "not-needed",
        model: str = "",
        mark_cacheable: bool = True,
        timeout_secs: float = 30.0,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        # Idle connections are dropped well before the 5 s keep-alive most servers use, so a
        # request never goes out on a connection the upstream is closing at that moment.
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200, keepalive_expiry=2.0)
        self.client = client or httpx.AsyncClient(timeout=timeout_secs, limits=limits)
        self.headers = {"Authorization": f"Bearer {api_key}", "Accept": "text/event-stream", **(headers or {})}
        self.model = model
        self.mark_cacheable = mark_cacheable
        self.extra_body = dict(extra_body or {})

    def _body(self, request: UpstreamRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model or request.model,
            "messages": render_openai_messages(request, mark_cacheable=self.mark_cacheable),
            "temperature": request.temperature,
            "stream": True,
            **self.extra_body,
        }
        if request.max_tokens:
            body["max_tokens"] = request.max_tokens
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        return body

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the completion, mapping each SSE event to one chunk."""
        try:
            async with self.client.stream("POST", self.url, json=self._body(request), headers=self.headers) as response:
                if response.status_code >= 400:
                    detail = (await response.aread()).decode("utf-8", errors="replace")[:500]
                    raise UpstreamError(f"OpenAI-compatible upstream answered HTTP {response.status_code}: {detail}")
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    for chunk in _chunks(data):
                        yield chunk
        except httpx.HTTPError as exc:
            raise UpstreamError(f"OpenAI-compatible upstream failed: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()
