"""Upstream: any OpenAI-compatible chat-completions endpoint, streamed over aiohttp.

The SSE stream is parsed directly (no SDK) and read with aiohttp, whose reader splits lines in C: at a hundred
streams, model building and httpx's per-chunk layers dominated the proxy's CPU. The body keeps to what every
common server accepts; what follows the finish chunk is read in the background, so the connection is reused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import httpx

from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest
from pipecat_harness.proxy.watchdog import Watchdog

__all__ = ["DRAIN_SECS", "IDLE_CONNECTION_SECS", "MAX_LINE_BYTES", "OpenAICompatibleUpstream", "render_openai_messages"]

#: How long an idle upstream connection is kept: under the 5 s keep-alive most servers close it after.
IDLE_CONNECTION_SECS = 2.0

#: Longest SSE line accepted (a tool call's whole arguments can come in one event).
MAX_LINE_BYTES = 2 << 20

#: Longest background read of what follows the finish chunk before the connection is closed instead.
DRAIN_SECS = 5.0

# The C scanner behind ``json.loads``, called directly: what ``loads`` adds costs twice a token event's scan.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_value(text: str) -> Any:
    """The JSON value ``text`` holds, with no surrounding whitespace (else ``ValueError``)."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("expecting a JSON value") from None
    if end != len(text):
        raise ValueError(f"extra data after the JSON value at {end}")
    return value


def render_openai_messages(
    request: UpstreamRequest, *, mark_cacheable: bool = False, system_blocks: bool = False
) -> list[dict[str, Any]]:
    """The request as OpenAI messages, the system prompt first.

    The system prompt is one string, or text blocks, the base marked ``cache_control`` with ``mark_cacheable``
    (``system_blocks``: unmarked). An assistant tool-call message without content gets ``""``.
    """
    messages = [{**message, "content": ""} if message.get("role") == "assistant" and message.get("tool_calls")
                and message.get("content") is None else message for message in request.messages]
    texts = request.system.blocks()
    if not texts:
        return messages
    if not (mark_cacheable or system_blocks):
        return [{"role": "system", "content": "\n\n".join(texts)}, *messages]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text} for text in texts]
    if mark_cacheable and request.system.base:
        blocks[0]["cache_control"] = {"type": "ephemeral"}
    return [{"role": "system", "content": blocks}, *messages]


def _tool_calls(delta: Mapping[str, Any]) -> tuple[ToolCallDelta, ...]:
    calls = [(call, call.get("function") or {}) for call in delta.get("tool_calls") or []]
    return tuple(ToolCallDelta(int(call.get("index", 0)), call.get("id"), function.get("name"),
                               function.get("arguments") or "") for call, function in calls)


def _chunks(data: bytes | str) -> list[UpstreamChunk]:
    """The chunks of one SSE ``data:`` payload (``UpstreamError`` for a non-chunk or an error event)."""
    try:
        event = _json_value(data if isinstance(data, str) else data.decode())
    except ValueError as exc:
        raise UpstreamError(f"OpenAI-compatible upstream sent a malformed event: {data[:200]!r}") from exc
    if not isinstance(event, dict):
        raise UpstreamError(f"OpenAI-compatible upstream sent a non-object event: {data[:200]!r}")
    if event.get("error"):
        raise UpstreamError(f"OpenAI-compatible upstream reported an error: {event['error']}")
    chunks = []
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        calls = _tool_calls(delta) if delta.get("tool_calls") else ()
        text = delta.get("content") or ""
        finish = choice.get("finish_reason")
        if text or calls or finish:
            chunks.append(UpstreamChunk(text=text, tool_calls=calls, finish_reason=finish))
    return chunks


def _stop_read_timer(response: aiohttp.ClientResponse) -> None:
    """End aiohttp's ``sock_read`` timer once the headers are in: it re-arms per network segment (a token).

    One :class:`Watchdog` bounds the body's reads instead; the connection's next request sets its own again.
    """
    connection = response.connection
    if connection is not None and connection.protocol is not None:
        connection.protocol.read_timeout = None


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read what follows the finish chunk, then hand the connection back to the pool."""
    try:
        async with asyncio.timeout(DRAIN_SECS):
            while await response.content.readany():
                pass
    except (aiohttp.ClientError, TimeoutError):
        response.close()
    else:
        response.release()


async def _drain_httpx(reply: httpx.Response, lines: AsyncIterator[str]) -> None:
    try:
        async with asyncio.timeout(DRAIN_SECS):
            async for _ in lines:
                pass
    except (httpx.HTTPError, TimeoutError):
        pass
    finally:
        await reply.aclose()


class OpenAICompatibleUpstream(Upstream):
    """Streams from an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: Endpoint base URL (e.g. ``http://127.0.0.1:8001/v1``).
        api_key: Key sent as a bearer token.
        model: Model name; overrides the one the platform asked for when set.
        mark_cacheable: Send the system prompt as blocks, the base block marked ``cache_control``.
        system_blocks: Send the system prompt as text blocks (for providers that want parts).
        timeout_secs: Longest wait to connect, for the response headers and between two reads of the stream.
        extra_body: Extra JSON fields sent with every request (gateway-specific options).
        headers: Extra HTTP headers.
        session: An existing ``aiohttp.ClientSession`` (default: one created on first use).
        client: An ``httpx.AsyncClient`` to stream through instead (custom transports, test doubles).
    """

    name = "openai"

    def __init__(self, base_url: str, *, api_key: str = "not-needed", model: str = "", mark_cacheable: bool = False,
                 system_blocks: bool = False, timeout_secs: float = 30.0, extra_body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None, session: aiohttp.ClientSession | None = None,
                 client: httpx.AsyncClient | None = None) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.session = session
        self.client = client
        self._owns_session = session is None
        self.timeout = aiohttp.ClientTimeout(total=None, connect=timeout_secs, sock_read=timeout_secs)
        self.read_timeout_secs = timeout_secs
        self.headers = {"Authorization": f"Bearer {api_key}", "Accept": "text/event-stream",
                        "Content-Type": "application/json", **(headers or {})}
        self.model = model
        self.mark_cacheable = mark_cacheable
        self.system_blocks = system_blocks
        self.extra_body = dict(extra_body or {})
        self._drains: set[asyncio.Task[None]] = set()

    def _body(self, request: UpstreamRequest) -> dict[str, Any]:
        messages = render_openai_messages(request, mark_cacheable=self.mark_cacheable, system_blocks=self.system_blocks)
        body: dict[str, Any] = {"model": self.model or request.model, "messages": messages,
                                "temperature": request.temperature, "stream": True, **self.extra_body}
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
            self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
            self._owns_session = True
        return self.session

    def _background(self, drain: Any) -> None:
        task = asyncio.get_running_loop().create_task(drain)
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the completion, mapping each SSE event to one chunk (a stream ends after its finish chunk)."""
        # A lone surrogate has no UTF-8 form; "backslashreplace" writes it as its JSON escape.
        body = json.dumps(self._body(request), ensure_ascii=False).encode("utf-8", "backslashreplace")
        try:
            if self.client is not None:
                async for chunk in self._stream_httpx(body, request.sent):
                    yield chunk
                return
            try:
                response = await self._session().post(self.url, data=body, headers=self.headers)
            finally:
                request.sent()
            complete = False
            try:
                if response.status >= 400:
                    detail = (await response.read()).decode("utf-8", errors="replace")[:500]
                    raise UpstreamError(f"OpenAI-compatible upstream answered HTTP {response.status}: {detail}")
                # One read per network segment, split here: reading by line costs two awaits per token.
                _stop_read_timer(response)
                content = response.content
                watchdog = Watchdog(self.read_timeout_secs)
                pending = b""
                try:
                    while True:
                        watchdog.wait(self.read_timeout_secs)
                        try:
                            piece = await content.readany()
                        except asyncio.CancelledError:
                            watchdog.raise_if_expired()
                            raise
                        finally:
                            watchdog.waiting = False
                        if not piece:
                            break
                        *lines, pending = (pending + piece).split(b"\n") if pending else piece.split(b"\n")
                        for line in lines:
                            if not line.startswith(b"data:"):
                                continue
                            data = line[5:].strip()
                            if data == b"[DONE]":
                                complete = True
                                return
                            for chunk in _chunks(data):
                                complete = chunk.finish_reason is not None
                                yield chunk
                                if complete:
                                    return
                        if len(pending) > MAX_LINE_BYTES:
                            raise UpstreamError(f"OpenAI-compatible upstream sent a line over {MAX_LINE_BYTES} bytes")
                finally:
                    watchdog.cancel()
            finally:
                if complete and not response.content.at_eof():
                    self._background(_drain(response))
                else:
                    response.release()
        except (aiohttp.ClientError, httpx.HTTPError, TimeoutError) as exc:
            raise UpstreamError(f"OpenAI-compatible upstream failed: {type(exc).__name__}: {exc}") from exc

    async def _stream_httpx(self, body: bytes, sent: Callable[[], None]) -> AsyncIterator[UpstreamChunk]:
        assert self.client is not None
        try:
            outgoing = self.client.build_request("POST", self.url, content=body, headers=self.headers)
            reply = await self.client.send(outgoing, stream=True)
        finally:
            sent()
        complete = False
        try:
            if reply.status_code >= 400:
                detail = (await reply.aread()).decode("utf-8", errors="replace")[:500]
                raise UpstreamError(f"OpenAI-compatible upstream answered HTTP {reply.status_code}: {detail}")
            lines = reply.aiter_lines()
            async for text in lines:
                if not text.startswith("data:"):
                    continue
                data = text[5:].strip()
                if data == "[DONE]":
                    complete = True
                    return
                for chunk in _chunks(data):
                    complete = chunk.finish_reason is not None
                    yield chunk
                    if complete:
                        return
        finally:
            if complete and not reply.is_closed:
                self._background(_drain_httpx(reply, lines))
            else:
                await reply.aclose()

    async def aclose(self) -> None:
        """Finish background reads; close the HTTP session this upstream created and the httpx client it was given."""
        if self._drains:
            await asyncio.gather(*tuple(self._drains), return_exceptions=True)
        if self.session is not None and self._owns_session:
            await self.session.close()
        if self.client is not None:
            await self.client.aclose()
