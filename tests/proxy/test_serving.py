"""The serving path on a real socket: SSE framing and what happens when the caller hangs up."""

import asyncio
import json
import threading

import httpx

from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.sse import ChunkWriter
from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk


class EndlessUpstream(Upstream):
    """Streams a token every 10 ms until it is closed; says when it was."""

    def __init__(self) -> None:
        self.sent = 0
        self.closed = threading.Event()

    async def stream(self, request):
        try:
            while True:
                self.sent += 1
                yield UpstreamChunk(text=f"word{self.sent} ")
                await asyncio.sleep(0.01)
        finally:
            self.closed.set()


def test_events_are_the_chunk_objects_with_the_same_id_and_model():
    writer = ChunkWriter('model "x"')
    events = [writer.role(), writer.text('caf\u00e9 "quoted"\n'), writer.finish("stop"),
              writer.tool_calls((ToolCallDelta(0, "call_1", "lookup", '{"a":1}'),))]
    for event in events:
        assert event.startswith(b"data: ") and event.endswith(b"\n\n")
        chunk = json.loads(event[6:])
        choice = chunk["choices"][0]
        assert chunk == writer.chunk(choice["delta"], choice["finish_reason"])
    assert json.loads(events[1][6:])["choices"][0]["delta"] == {"content": 'caf\u00e9 "quoted"\n'}


async def test_a_caller_hanging_up_closes_the_upstream_stream(serve):
    upstream = EndlessUpstream()
    with serve(create_app(ProxyService(upstream))) as server:
        body = {"messages": [{"role": "user", "content": "hi"}], "call": {"id": "hangup"}, "stream": True}
        async with httpx.AsyncClient(base_url=server.url) as client:
            async with client.stream("POST", "/chat/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if "word3" in line:
                        break  # leaving the block closes the connection mid-stream
        assert await asyncio.to_thread(upstream.closed.wait, 10)
    sent_at_close = upstream.sent
    assert sent_at_close < 500  # it stopped with the caller, not after streaming on for seconds
