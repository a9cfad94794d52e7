"""The OpenAI-compatible upstream as a real server's stream reaches it: cut, empty, pooled, configured from the env."""

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from loguru import logger

from pipecat_harness.config import HarnessConfig
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.command import build_service
from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream
from pipecat_harness.proxy.service import DEFAULT_FALLBACK, ProxyService
from pipecat_harness.proxy.upstream import SystemPrompt, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest


def _turn(call_id: str, text: str = "Hello there.") -> dict:
    return {"model": "m", "stream": True, "call": {"id": call_id},
            "messages": [{"role": "user", "content": text}]}


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    event = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


class RawUpstream:
    """An aiohttp server answering ``/v1/chat/completions`` with the bytes a test gives, then EOF."""

    def __init__(
        self, body: bytes, *, tail: bytes = b"", tail_delay_secs: float = 0.0, cuts: tuple[int, ...] = ()
    ) -> None:
        self.body = body
        self.cuts = cuts  # offsets at which the body is split into writes a moment apart (separate segments)
        self.tail = tail
        self.tail_delay_secs = tail_delay_secs
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.peers: set[tuple] = set()
        self.requests = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.requests += 1
        self.peers.add(request.transport.get_extra_info("peername"))  # type: ignore[union-attr]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        start = 0
        for end in (*self.cuts, len(self.body)):
            if self.body[start:end]:
                try:
                    await response.write(self.body[start:end])
                except ConnectionResetError:  # the proxy gave up on the stream: nobody reads the rest
                    return response
                await asyncio.sleep(0.01)
            start = end
        if self.tail:
            await asyncio.sleep(self.tail_delay_secs)  # a server's generator ends a moment after its last chunk
            await response.write(self.tail)
        await response.write_eof()
        return response

    async def __aenter__(self) -> "RawUpstream":
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def _relay(service: ProxyService, body: dict) -> str:
    """The text a platform hears for one streamed turn through the proxy application."""
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        response = await client.post("/chat/completions", json=body)
    assert response.status_code == 200
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks].count("stop") == 1
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


@pytest.fixture
def warnings():
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    yield lines
    logger.remove(sink)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_chunk({"role": "assistant"}) + _chunk({"content": "Your order is"}), id="cut-mid-reply"),
        pytest.param(_chunk({"role": "assistant"}) + _chunk({"content": "Your order"}) + b"data: [DONE]\n\n",
                     id="done-without-finish"),
        pytest.param(b"", id="empty-200"),
    ],
)
async def test_a_stream_without_a_finish_reason_is_an_upstream_error_heard_as_the_fallback(body, warnings):
    records: list[tuple[str, dict]] = []
    async with RawUpstream(body) as server:
        upstream = OpenAICompatibleUpstream(f"http://127.0.0.1:{server.port}/v1")
        service = ProxyService(upstream)
        service._record = lambda action, evidence: records.append((action, evidence))  # type: ignore[method-assign]
        heard = await _relay(service, _turn("cut-call"))
        await upstream.aclose()
    assert heard.endswith(DEFAULT_FALLBACK)
    assert any("ended without a finish reason" in line and "cut-call" in line for line in warnings)
    assert records == [("upstream_fallback", {"call_id": "cut-call", "reason": "error",
                                              "error": "the upstream stream ended without a finish reason"})]


async def test_events_split_anywhere_across_reads_are_relayed_whole():
    # CRLF line ends, a comment line, an 80 KB event (longer than one read), and writes cut mid-line,
    # mid-"data:" and inside a two-byte UTF-8 character.
    long_text = "x" * 80_000
    body = (b": keep-alive\r\n\r\n" + _chunk({"role": "assistant"}).replace(b"\n", b"\r\n")
            + _chunk({"content": "Caf\u00e9 "}) + _chunk({"content": long_text}) + _chunk({"content": " done."})
            + _chunk({}, "stop") + b"data: [DONE]\n\n")
    accent = body.index("\u00e9".encode()) + 1
    cuts = (3, body.index(b"data:", 20) + 2, accent, accent + 5_000, accent + 40_000, len(body) - 20)
    async with RawUpstream(body, cuts=cuts) as server:
        upstream = OpenAICompatibleUpstream(f"http://127.0.0.1:{server.port}/v1")
        heard = await _relay(ProxyService(upstream), _turn("split-call"))
        await upstream.aclose()
    assert heard == "Caf\u00e9 " + long_text + " done."


async def test_a_line_over_the_limit_is_an_upstream_error_heard_as_the_fallback(monkeypatch, warnings):
    monkeypatch.setattr("pipecat_harness.proxy.openai_upstream.MAX_LINE_BYTES", 10_000)
    body = _chunk({"content": "Hello. "}) + b"data: " + b"y" * 30_000
    async with RawUpstream(body, cuts=(len(body) - 20_000,)) as server:
        upstream = OpenAICompatibleUpstream(f"http://127.0.0.1:{server.port}/v1")
        heard = await _relay(ProxyService(upstream), _turn("long-line"))
        await upstream.aclose()
    assert heard == "Hello.  " + DEFAULT_FALLBACK
    assert any("over 10000 bytes" in line and "long-line" in line for line in warnings)


async def test_twenty_turns_share_one_pooled_upstream_connection():
    answer = _chunk({"role": "assistant"}) + _chunk({"content": "Sure, one moment."}) + _chunk({}, "stop")
    async with RawUpstream(answer, tail=b"data: [DONE]\n\n", tail_delay_secs=0.02) as server:
        upstream = OpenAICompatibleUpstream(f"http://127.0.0.1:{server.port}/v1")
        service = ProxyService(upstream)
        for turn in range(20):
            assert await _relay(service, _turn("pooled", f"Question {turn}?")) == "Sure, one moment."
            await asyncio.sleep(0.05)  # the caller listens before the next turn
        await upstream.aclose()
    assert server.requests == 20
    assert len(server.peers) <= 2


def test_tool_choice_from_the_environment_is_decoded_as_json(monkeypatch):
    named = {"type": "function", "function": {"name": "lookup_site"}}
    monkeypatch.setenv("PIPECAT_HARNESS_PROXY__TOOL_CHOICE", json.dumps(named))
    assert HarnessConfig().proxy.tool_choice == named
    monkeypatch.setenv("PIPECAT_HARNESS_PROXY__TOOL_CHOICE", "required")
    assert HarnessConfig().proxy.tool_choice == "required"
    monkeypatch.setenv("PIPECAT_HARNESS_PROXY__CONTENT_PARTS", '["image_url"]')
    monkeypatch.setenv("PIPECAT_HARNESS_PROXY__UPSTREAM_SYSTEM_BLOCKS", "true")
    config = HarnessConfig()
    assert config.proxy.content_parts == ["image_url"] and config.proxy.upstream_system_blocks is True
    assert build_service(config, OpenAICompatibleUpstream("http://x.invalid/v1")).policy.content_parts == {
        "image_url"}


def test_an_unknown_tool_choice_from_the_environment_is_refused_naming_the_setting(monkeypatch):
    monkeypatch.setenv("PIPECAT_HARNESS_PROXY__TOOL_CHOICE", "sometimes")
    with pytest.raises(ValueError, match="tool_choice"):
        HarnessConfig()


class PacedUpstream(Upstream):
    """Streams ``words`` one every ``pause_secs`` (a longer ``stall_secs`` before the word at ``stall_at``)."""

    def __init__(self, words: int, pause_secs: float, stall_at: int = -1, stall_secs: float = 0.0) -> None:
        self.words, self.pause_secs, self.stall_at, self.stall_secs = words, pause_secs, stall_at, stall_secs

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        for index in range(self.words):
            await asyncio.sleep(self.stall_secs if index == self.stall_at else self.pause_secs)
            yield UpstreamChunk(text=f"w{index} ")
        yield UpstreamChunk(finish_reason="stop")


async def _paced(upstream: Upstream) -> str:
    service = ProxyService(upstream, first_token_timeout_secs=0.3, chunk_timeout_secs=0.2)
    prepared = await service.prepare("paced", [{"role": "user", "content": "Go on."}])
    chunks = [chunk async for chunk in service.stream(prepared.request, call_id="paced")]
    assert [chunk.finish_reason for chunk in chunks if chunk.finish_reason] == ["stop"]
    return "".join(chunk.text for chunk in chunks)


async def test_a_slow_stream_that_keeps_coming_is_relayed_whole():
    # 12 words 0.05 s apart: 0.6 s in all, longer than both waits, none of which is ever exceeded.
    assert await _paced(PacedUpstream(12, 0.05)) == "".join(f"w{i} " for i in range(12))


async def test_a_stall_between_chunks_ends_in_the_fallback_and_the_task_is_not_left_cancelled():
    heard = await _paced(PacedUpstream(6, 0.02, stall_at=3, stall_secs=1.0))
    assert heard == "w0 w1 w2  " + DEFAULT_FALLBACK
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # still runnable: no cancellation left pending for this task


async def test_a_body_stalled_past_the_upstreams_read_timeout_is_an_upstream_error():
    # Headers and the first token arrive; the rest comes after the upstream's own read bound (0.1 s).
    opening = _chunk({"role": "assistant"})
    tail = _chunk({}, "stop") + b"data: [DONE]\n\n"
    body = opening + _chunk({"content": "Hello"})
    async with RawUpstream(body, cuts=(len(opening),), tail=tail, tail_delay_secs=0.6) as server:
        upstream = OpenAICompatibleUpstream(f"http://127.0.0.1:{server.port}/v1", timeout_secs=0.1)
        request = UpstreamRequest(system=SystemPrompt("base"), messages=[{"role": "user", "content": "Hi"}])
        seen: list[str] = []
        with pytest.raises(UpstreamError, match="TimeoutError"):
            async for chunk in upstream.stream(request):
                seen.append(chunk.text)
        assert seen == ["Hello"]
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        # Through the service (whose own waits are longer) the stall is heard as the fallback.
        service = ProxyService(upstream, first_token_timeout_secs=5.0, chunk_timeout_secs=5.0)
        assert await _relay(service, _turn("stalled")) == "Hello " + DEFAULT_FALLBACK
        await upstream.aclose()
