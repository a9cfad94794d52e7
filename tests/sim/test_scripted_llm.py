from pipecat.frames.frames import (
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from pipecat_harness.sim.scenario import ModelScript
from pipecat_harness.sim.scripted_llm import ScriptedLLMService, render_template

SCRIPT = ModelScript.model_validate(
    {
        "first_token_secs": 0.0,
        "token_secs": 0.0,
        "decisions": [
            {"when": {"tool": "get_order_details", "result": "not found"}, "say": "I could not find it."},
            {
                "when": {"user": "order (?P<order>.+)"},
                "say": "Let me check.",
                "tool_calls": [{"name": "get_order_details", "args": {"order_id": "{order|identifier}"}}],
            },
        ],
        "fallback": "Pardon?",
    }
)


def frame_types(frames):
    return [type(f) for f in frames]


async def test_tool_calls_go_through_pipecats_function_calling_path():
    llm = ScriptedLLMService(SCRIPT)
    calls = []

    async def get_order_details(params):
        calls.append(dict(params.arguments))
        await params.result_callback({"error": "order not found"})

    llm.register_function("get_order_details", get_order_details)
    context = LLMContext(messages=[{"role": "user", "content": "my order W as in whiskey two three"}])
    down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(context)])
    assert calls == [{"order_id": "W23"}]
    types = frame_types(down)
    assert types.index(LLMFullResponseStartFrame) < types.index(LLMTextFrame)
    assert LLMTextFrame in types
    assert types.index(FunctionCallInProgressFrame) < types.index(FunctionCallResultFrame)
    result = next(f for f in down if isinstance(f, FunctionCallResultFrame))
    assert result.tool_call_id == "call_0001" and result.result == {"error": "order not found"}
    assert LLMFullResponseEndFrame in types
    assert llm.calls[0].decision_index == 1
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "Let me check."


async def test_decisions_react_to_tool_results_and_fall_back():
    llm = ScriptedLLMService(SCRIPT)
    context = LLMContext(
        messages=[
            {"role": "user", "content": "order W1"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "get_order_details", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"error": "order not found"}'},
        ]
    )
    other = LLMContext(messages=[{"role": "user", "content": "hello"}])
    down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(context), LLMContextFrame(other)])
    texts = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert texts == "I could not find it.Pardon?"
    assert [c.decision_index for c in llm.calls] == [0, None]


def test_templates_render_filters_and_keep_structure():
    variables = {"order": "W as in whiskey two", "name": "Mei"}
    rendered = render_template({"id": "{order|identifier}", "list": ["{name|lower}", 3], "missing": "{nope}"},
                               variables)
    assert rendered == {"id": "W2", "list": ["mei", 3], "missing": ""}


LATE_RESULT_SCRIPT = ModelScript.model_validate({
    "first_token_secs": 0.0, "token_secs": 0.0,
    "decisions": [
        {"when": {"tool": "book_callback", "result": "outcome_unknown"}, "say": "Still checking the booking."},
        {"when": {"user": "no|bye"}, "say": "Goodbye!"},
    ],
})


def _late_result_messages(role: str) -> list[dict]:
    import json

    from pipecat.processors.aggregators import async_tool_messages

    final = async_tool_messages.build_final_result_message("c1", json.dumps({"status": "outcome_unknown"}))
    return [
        {"role": "user", "content": "Book a callback please."},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "book_callback", "arguments": "{}"}}]},
        async_tool_messages.build_started_message("c1"),
        {"role": "assistant", "content": "I'm booking it."},
        {**final, "role": role},
    ]


def test_a_late_async_result_is_read_as_the_tool_result_whatever_role_carries_it():
    from pipecat_harness.sim.scripted_llm import ScriptedModel

    # Pipecat appends a late result as a developer message; Gemini's adapter sends it as a user turn.
    # Either way it is that call's result, never the caller's words ("unknown" would match "no").
    for role in ("developer", "user"):
        model = ScriptedModel(LATE_RESULT_SCRIPT)
        call = model.received(_late_result_messages(role))
        model.decide(call)
        assert call.planned_text == "Still checking the booking.", role


async def test_the_scripted_model_answers_an_out_of_band_request_with_the_summary():
    from pipecat_harness.fakes import ChatRequest
    from pipecat_harness.sim.scripted_llm import ScriptedChatModel

    script = ModelScript.model_validate({"summary": "They asked about a refund.", "decisions": [
        {"when": {"user": "."}, "say": "Not a summary."}]})
    model = ScriptedChatModel(script)
    reply = await model.reply(ChatRequest(provider="gemini", model="m", streaming=False, max_tokens=50, messages=[
        {"role": "system", "content": "Summarise."}, {"role": "user", "content": "Conversation history: ..."}]))
    assert reply.text == "They asked about a refund." and not model.calls
    assert model.summary_requests == [{"system_instruction": "Summarise.", "max_tokens": 50,
                                       "messages": [{"role": "user", "content": "Conversation history: ..."}]}]


async def test_a_decision_reacts_to_a_note_added_since_the_model_last_spoke():
    script = ModelScript.model_validate({
        "first_token_secs": 0.0, "token_secs": 0.0, "fallback": "Still checking.",
        "decisions": [{"when": {"note": "refund.*went through"}, "say": "It went through after all."}],
    })
    llm = ScriptedLLMService(script)
    note = {"role": "developer", "content": "Update on an earlier issue_refund: it went through."}
    fresh = LLMContext(messages=[{"role": "user", "content": "refund please"},
                                 {"role": "assistant", "content": "Checking."},
                                 {"role": "user", "content": "okay"}, note])
    # A note the model already answered is old news.
    answered = LLMContext(messages=[{"role": "user", "content": "refund please"}, note,
                                    {"role": "assistant", "content": "Checking."}, {"role": "user", "content": "ok"}])
    down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(fresh), LLMContextFrame(answered)])
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "It went through after all.Still checking."
