"""Pipecat's OpenAILLMService and the openai SDK against the OpenAI-compatible chat fake."""

from __future__ import annotations

from typing import Any

import pytest
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.fakes import ChatReply, OpenAIChatFake
from tests.fakes.request_shapes import SHAPES, post_shape

TOOLS = ToolsSchema(standard_tools=[
    FunctionSchema(name="lookup_order", description="Look up an order.", properties={"order_id": {"type": "string"}},
                   required=["order_id"]),
])


async def test_text_then_parallel_tool_calls_reach_pipecat():
    fake = await OpenAIChatFake([ChatReply(text="Let me check both.", tool_calls=[
        {"id": "c1", "name": "lookup_order", "arguments": {"order_id": "#W1"}},
        {"id": "c2", "name": "lookup_order", "arguments": {"order_id": "#W2"}}])], server="openai").start()
    looked_up: list[str] = []
    try:
        llm = OpenAILLMService(api_key="offline", base_url=fake.base_url,
                               settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction="Be brief."))

        async def lookup_order(params: Any) -> None:
            looked_up.append(params.arguments["order_id"])
            await params.result_callback({"status": "shipped"})

        llm.register_function("lookup_order", lookup_order)
        context = LLMContext(messages=[{"role": "user", "content": "Where are my orders?"}], tools=TOOLS)
        down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=0.5)],
                                 expected_down_frames=None)
    finally:
        await fake.stop()
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "Let me check both."
    assert sorted(looked_up) == ["#W1", "#W2"]
    request = fake.requests[0]
    assert request.messages[0] == {"role": "system", "content": "Be brief."}
    assert request.tools == ["lookup_order"] and request.raw["stream"] is True
    assert fake.sent("chunk")[-1]["usage"]["total_tokens"] > 0


async def test_the_openai_sdk_reads_a_whole_completion():
    from openai import AsyncOpenAI

    fake = await OpenAIChatFake(lambda request: ChatReply(text=f"You said {request.messages[-1]['content']}"),
                                server="openai").start()
    try:
        client = AsyncOpenAI(api_key="offline", base_url=fake.base_url)
        completion = await client.chat.completions.create(
            model="m", messages=[{"role": "developer", "content": "Echo."}, {"role": "user", "content": "hi"}])
        await client.close()
    finally:
        await fake.stop()
    assert completion.choices[0].message.content == "You said hi"
    assert fake.requests[0].system == "Echo."


async def test_out_of_band_inference_is_a_whole_completion_request():
    fake = await OpenAIChatFake(lambda request: ChatReply(text="A short summary.")).start()
    try:
        llm = OpenAILLMService(api_key="offline", base_url=fake.base_url,
                               settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction="Be brief."))
        summary = await llm.run_inference(LLMContext(messages=[{"role": "user", "content": "History: ..."}]),
                                          max_tokens=120, system_instruction="Summarise the call.")
    finally:
        await fake.stop()
    assert summary == "A short summary."
    request = fake.requests[0]
    assert not request.streaming and request.max_tokens == 120
    assert request.messages[0] == {"role": "system", "content": "Summarise the call."}


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
@pytest.mark.parametrize("server", ["strict", "openai", "llama-cpp-python"])
async def test_the_fake_accepts_what_the_named_server_accepts_and_no_more(shape, server):
    async with OpenAIChatFake(lambda request: ChatReply(text="Fine."), server=server) as fake:
        status, events = await post_shape(fake.base_url, shape.body)
    expected = shape.expected[server]
    assert status == expected.status
    if expected.status == 200:
        assert bool(events) == expected.answered
    assert bool(fake.refused) == (expected.status != 200 or not expected.answered)


async def test_only_openai_sends_usage_in_a_stream():
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}]}
    usage = {}
    for server in ("strict", "openai", "llama-cpp-python"):
        async with OpenAIChatFake(["Fine."], server=server) as fake:
            _, events = await post_shape(fake.base_url, body)
        usage[server] = any(event.get("usage") for event in events)
    assert usage == {"strict": True, "openai": True, "llama-cpp-python": False}
