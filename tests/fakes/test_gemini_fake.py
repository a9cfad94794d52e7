"""Pipecat's GoogleLLMService against the Gemini fake: what Gemini receives, and what Pipecat parses."""

from __future__ import annotations

from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.google.llm import GoogleLLMService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.checklist.directive import DEFAULT_MARKER
from pipecat_harness.checklist.director import ChecklistDirector
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.fakes import ChatReply, ChatRequest, GeminiFake
from pipecat_harness.state.memory import MemoryStateStore

BASE = "You are Sam, the site check-in agent."
TOOLS = ToolsSchema(standard_tools=[
    FunctionSchema(name="log_note", description="Log a note.", properties={"note": {"type": "string"}},
                   required=["note"]),
])


def _llm(fake: GeminiFake) -> GoogleLLMService:
    return GoogleLLMService(api_key="offline", http_options=fake.http_options(),
                            settings=GoogleLLMService.Settings(system_instruction=BASE))


def _tool_then_text(request: ChatRequest) -> ChatReply:
    if request.messages[-1]["role"] == "tool":
        return ChatReply(text="Noted. Were there any safety incidents this week?")
    return ChatReply(tool_calls=[{"id": "n1", "name": "log_note", "arguments": {"note": "first"}},
                                 {"id": "n2", "name": "log_note", "arguments": {"note": "second"}}])


async def test_directive_is_gemini_system_instruction_on_every_model_run_of_the_turn():
    fake = await GeminiFake(_tool_then_text).start()
    try:
        llm = _llm(fake)
        notes: list[str] = []

        async def log_note(params: Any) -> None:
            notes.append(params.arguments["note"])
            await params.result_callback({"logged": True})

        llm.register_function("log_note", log_note)
        context = LLMContext(messages=[{"role": "user", "content": "Hi, this is Dana."}], tools=TOOLS)
        pair = LLMContextAggregatorPair(context)
        director = ChecklistDirector(ChecklistDriver(bundled_checklist(), MemoryStateStore()), call_id="call-1")
        pipeline = Pipeline([director, llm, pair.assistant()])

        await run_test(pipeline, frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=1.5)],
                       expected_down_frames=None)
    finally:
        await fake.stop()
    bodies = fake.received("request")
    assert len(bodies) == 2, "the tool result re-runs the model"
    assert sorted(notes) == ["first", "second"]  # both calls of one response ran
    wording = director.last_directive.wording
    for body in bodies:
        system = " ".join(p["text"] for p in body["systemInstruction"]["parts"])
        assert system.startswith(BASE) and wording in system
        contents = [p.get("text", "") for c in body["contents"] for p in c["parts"]]
        assert not any(DEFAULT_MARKER in text for text in contents), contents
    second = bodies[1]["contents"]
    # Pipecat's adapter sends each call of the parallel pair as its own model turn and answer.
    assert [c["role"] for c in second] == ["user", "model", "user", "model", "user"]
    calls = [p["functionCall"] for c in second if c["role"] == "model" for p in c["parts"]]
    answers = [p["functionResponse"] for c in second[2:] if c["role"] == "user" for p in c["parts"]]
    assert [c["id"] for c in calls] == ["n1", "n2"] and [a["id"] for a in answers] == ["n1", "n2"]
    assert [m["role"] for m in fake.requests[1].messages] == ["system", "user", "assistant", "tool", "assistant",
                                                               "tool"]
    assert fake.requests[1].messages[0] == {"role": "system", "content": fake.requests[1].system}


async def test_text_deltas_and_usage_reach_pipecat():
    fake = await GeminiFake(["Hello there, Dana."]).start()
    try:
        down, _ = await run_test(_llm(fake), frames_to_send=[LLMContextFrame(LLMContext(
            messages=[{"role": "user", "content": "Hi."}]))], expected_down_frames=None)
    finally:
        await fake.stop()
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "Hello there, Dana."
    last = fake.sent("chunk")[-1]
    assert last["candidates"][0]["finishReason"] == "STOP" and last["usageMetadata"]["totalTokenCount"] > 0


async def test_out_of_band_inference_is_a_whole_response_request():
    # Pipecat's context summarisation calls run_inference: generateContent, not the stream.
    fake = await GeminiFake(lambda request: ChatReply(text="A short summary.")).start()
    try:
        summary = await _llm(fake).run_inference(LLMContext(messages=[{"role": "user", "content": "History: ..."}]),
                                                 max_tokens=120, system_instruction="Summarise the call.")
    finally:
        await fake.stop()
    assert summary == "A short summary."
    request = fake.requests[0]
    assert not request.streaming and request.max_tokens == 120 and request.system == "Summarise the call."
    assert fake.sent("response") and not fake.sent("chunk")
