"""Upstream: any OpenAI-compatible chat-completions endpoint, streamed over aiohttp.

The SSE stream is parsed directly (one ``json.loads`` per event) rather than
through a typed SDK: on the voice path every millisecond before the first
token counts, and at a hundred concurrent streams per-chunk model building
dominated the proxy's own cost. The client is aiohttp (Pipecat's own HTTP
client) rather than httpx: profiled at a hundred concurrent streams, httpx's
per-chunk layers (decoders, line splitting, the anyio stream) were the
largest single share of the proxy's CPU, and aiohttp's reader splits lines
in C. The request body is serialised once, straight from the history the
platform sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import aiohttp
import httpx

from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest

__all__ = ["IDLE_CONNECTION_SECS", "OpenAICompatibleUpstream", "render_openai_messages"]

#: How long an idle upstream connection is kept: well before the 5 s keep-alive most servers use, so a
#: request never goes out on a connection the upstream is closing at that moment.
IDLE_CONNECTION_SECS = 2.0


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


def _chunks(data: bytes) -> list[UpstreamChunk]:
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
        timeout_secs: Longest wait to connect and between two reads of the stream.
        extra_body: Extra JSON fields sent with every request (gateway-specific options).
        headers: Extra HTTP headers.
        session: An existing ``aiohttp.ClientSession`` (default: one created on first use).
        client: An ``httpx.AsyncClient`` to stream through instead (custom transports, test doubles).
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
        session: aiohttp.ClientSession | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.session = session
        self.client = client
        self._owns_session = session is None
        self.timeout = aiohttp.ClientTimeout(total=None, connect=timeout_secs, sock_read=timeout_secs)
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            **(headers or {}),
        }
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

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            connector = aiohttp.TCPConnector(limit=1000, keepalive_timeout=IDLE_CONNECTION_SECS)
            # SSE lines carrying whole tool-call arguments can exceed aiohttp's 64 KiB default.
            self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout, read_bufsize=1 << 20)
            self._owns_session = True
        return self.session

    async def _lines(self, body: bytes) -> AsyncGenerator[bytes, None]:
        """The response's lines (the HTTP status checked first)."""
        if self.client is not None:
            async with self.client.stream("POST", self.url, content=body, headers=self.headers) as reply:
                if reply.status_code >= 400:
                    detail = (await reply.aread()).decode("utf-8", errors="replace")[:500]
                    raise UpstreamError(f"OpenAI-compatible upstream answered HTTP {reply.status_code}: {detail}")
                async for text in reply.aiter_lines():
                    yield text.encode()
            return
        async with self._session().post(self.url, data=body, headers=self.headers) as response:
            if response.status >= 400:
                detail = (await response.read()).decode("utf-8", errors="replace")[:500]
                raise UpstreamError(f"OpenAI-compatible upstream answered HTTP {response.status}: {detail}")
            async for line in response.content:
                yield line

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the completion, mapping each SSE event to one chunk."""
        # A lone surrogate has no UTF-8 form; "backslashreplace" writes it as its JSON escape.
        body = json.dumps(self._body(request), ensure_ascii=False).encode("utf-8", "backslashreplace")
        lines = self._lines(body)
        try:
            async for line in lines:
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                for chunk in _chunks(data):
                    yield chunk
        except (aiohttp.ClientError, httpx.HTTPError, TimeoutError) as exc:
            raise UpstreamError(f"OpenAI-compatible upstream failed: {type(exc).__name__}: {exc}") from exc
        finally:
            await lines.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session this upstream created, and the httpx client it was given."""
        if self.session is not None and self._owns_session:
            await self.session.close()
        if self.client is not None:
            await self.client.aclose()
