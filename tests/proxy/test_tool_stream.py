"""Streamed tool-call arguments leave the proxy whole, only after the upstream's completed-call event."""

import json

from pipecat_harness.proxy.scripted import ScriptedReply, ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.tool_stream import CompletedToolCalls
from pipecat_harness.proxy.upstream import (
    SystemPrompt,
    ToolCallDelta,
    Upstream,
    UpstreamChunk,
    UpstreamError,
    UpstreamRequest,
)


def test_interleaved_fragments_of_parallel_calls_are_released_whole_in_order():
    calls = CompletedToolCalls()
    for delta in [
        ToolCallDelta(0, id="c0", name="get_order_details", arguments='{"order_id":"#W'),
        ToolCallDelta(1, id="c1", name="issue_refund", arguments='{"order_id":"#W1",'),
        ToolCallDelta(0, arguments='2378156"}'),  # this prefix alone would not parse; nor would '{"order_id":"#W'
        ToolCallDelta(1, arguments='"amount_usd":45}'),
    ]:
        calls.add(delta)
    released, dropped = calls.complete()
    assert dropped == []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in released] == [
        ("c0", "get_order_details", {"order_id": "#W2378156"}),
        ("c1", "issue_refund", {"order_id": "#W1", "amount_usd": 45}),
    ]


def test_malformed_oversize_and_nameless_calls_are_dropped_with_a_reason():
    calls = CompletedToolCalls(max_bytes=64)
    calls.add(ToolCallDelta(0, id="a", name="issue_refund", arguments='{"order_id": "#W1"'))  # never closed
    calls.add(ToolCallDelta(1, id="b", name="issue_refund", arguments='{"reason": "' + "x" * 100 + '"}'))
    calls.add(ToolCallDelta(2, id="c", arguments="{}"))
    calls.add(ToolCallDelta(3, id="d", name="get_order_details", arguments="[1, 2]"))
    released, dropped = calls.complete()
    assert released == []
    reasons = {d.index: d.reason for d in dropped}
    assert set(reasons) == {0, 1, 2, 3}
    assert "64 bytes" in reasons[1] and "no tool name" in reasons[2]


class FragmentsThenFail(Upstream):
    """Streams half a tool call, then the connection breaks."""

    async def stream(self, request):
        yield UpstreamChunk(tool_calls=(ToolCallDelta(0, id="c0", name="issue_refund", arguments='{"order_id":'),))
        yield UpstreamChunk(tool_calls=(ToolCallDelta(0, arguments='"#W1"}'),))  # parses now, but not complete
        raise UpstreamError("connection reset")


async def _collect(service: ProxyService) -> list[UpstreamChunk]:
    request = UpstreamRequest(system=SystemPrompt("base"), messages=[])
    return [chunk async for chunk in service.stream(request, call_id="c")]


async def test_service_sends_tool_calls_only_with_the_finish_event():
    upstream = ScriptedUpstream([ScriptedReply(text="One moment.", tool_calls=(
        {"name": "issue_refund", "arguments": {"order_id": "#W2378156", "amount_usd": 45}},
        {"name": "get_order_details", "arguments": {"order_id": "#W2378156"}},
    ))])
    chunks = await _collect(ProxyService(upstream))
    with_calls = [i for i, c in enumerate(chunks) if c.tool_calls]
    assert len(with_calls) == 1, "every call goes out once, in one chunk"
    position = with_calls[0]
    assert chunks[position + 1].finish_reason == "tool_calls" and position + 2 == len(chunks)
    sent = chunks[position].tool_calls
    assert [json.loads(c.arguments) for c in sent] == [{"order_id": "#W2378156", "amount_usd": 45},
                                                       {"order_id": "#W2378156"}]
    assert "".join(c.text for c in chunks) == "One moment."


async def test_a_stream_cut_mid_call_forwards_no_call():
    chunks = await _collect(ProxyService(FragmentsThenFail()))
    assert not any(c.tool_calls for c in chunks)
    assert chunks[-1].finish_reason == "stop"
    assert any(c.text for c in chunks)  # the fallback sentence instead


async def test_a_broken_call_turns_the_finish_into_stop():
    class Broken(Upstream):
        async def stream(self, request):
            yield UpstreamChunk(tool_calls=(ToolCallDelta(0, id="c0", name="issue_refund", arguments='{"a": '),))
            yield UpstreamChunk(finish_reason="tool_calls")

    chunks = await _collect(ProxyService(Broken()))
    assert not any(c.tool_calls for c in chunks) and chunks[-1].finish_reason == "stop"
