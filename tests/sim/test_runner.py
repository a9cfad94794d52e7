"""End-to-end simulated calls through a real PipelineWorker on virtual time."""

import pytest

from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import Scenario, load_scenario
from pipecat_harness.trace.timeline import Timeline

LONG_REPLY = (
    "Thanks for calling Acme. Your order shipped yesterday from our Denver warehouse. "
    "It should arrive on Thursday before noon."
)


def barge_in_scenario(word_timestamps: bool) -> Scenario:
    return Scenario.model_validate(
        {
            "name": f"barge_in_{'words' if word_timestamps else 'sentences'}",
            "tts": {"word_timestamps": word_timestamps},
            "model": {"greeting": LONG_REPLY, "decisions": [{"when": {"user": "stop"}, "say": "Sure."}]},
            "caller": [{"after": "bot_started", "delay": 5.0, "speech": [{"say": "Wait, stop."}]}],
        }
    )


@pytest.mark.parametrize("word_timestamps", [False, True])
def test_barge_in_mid_sentence_truncates_playback(tmp_path, word_timestamps):
    result = run_scenario(barge_in_scenario(word_timestamps), controls=[], trace_dir=tmp_path)
    greeting = result.playback[0]
    assert greeting.interrupted
    assert 0 < greeting.heard_words < greeting.generated_words
    timeline = Timeline.load(result.trace_path)
    interruptions = [e for e in timeline.of("interruption") if e.data["bot_speaking"]]
    assert len(interruptions) == 1
    assert interruptions[0].t == pytest.approx(timeline.of("bot_started_speaking")[0].t + 5.0, abs=0.3)
    committed = timeline.of("assistant_committed")[0].data["text"]
    assert LONG_REPLY.startswith(committed)
    if word_timestamps:
        # Word-level release: history holds about what was heard.
        assert abs(greeting.retained_words - greeting.heard_words) <= 1
    else:
        # Sentence-level release: the partly played sentence is dropped whole.
        assert committed == "Thanks for calling Acme."
        assert greeting.retained_words < greeting.heard_words


def test_duplicate_write_shows_its_failure_without_controls(tmp_path):
    scenario = load_scenario("pipecat_harness/scenarios/duplicate_refund.yaml")
    result = run_scenario(scenario, controls=[], trace_dir=tmp_path)
    assert result.tool_executions == {"issue_refund": 2}
    assert not result.passed and result.expected == "fail" and result.as_expected
    state = next(c for c in result.checks if c.name.startswith("state"))
    assert state.detail.startswith("got 2, expected 1")
    timeline = Timeline.load(result.trace_path)
    # Both identical requests went through Pipecat's function calling and returned results.
    assert [e.data["name"] for e in timeline.of("tool_request")] == ["issue_refund", "issue_refund"]
    assert len(timeline.of("tool_result")) == 2
    assert timeline.result["outcome"] == "fail"


def test_trace_holds_the_four_records(tmp_path):
    scenario = load_scenario("pipecat_harness/scenarios/duplicate_refund.yaml")
    result = run_scenario(scenario, controls=[], trace_dir=tmp_path)
    kinds = {e.kind for e in Timeline.load(result.trace_path)}
    assert {"speech_started", "asr_interim", "asr_final", "submitted"} <= kinds  # received
    assert {"model_input", "generated"} <= kinds  # model input and output
    assert {"tool_request", "tool_result"} <= kinds  # executed
    assert {"bot_started_speaking", "played_text", "bot_stopped_speaking", "assistant_committed"} <= kinds  # played
    assert {"call_started", "call_result", "turn_playback"} <= kinds


def test_caller_hangs_up_when_the_bot_never_answers():
    scenario = Scenario.model_validate(
        {
            "name": "no_answer",
            "model": {"greeting": "Hello.", "decisions": [{"when": {"user": "never matches xyz"}, "say": "x"}],
                      "fallback": ""},
            "caller": [{"speech": [{"silent": 0.3}]}, {"wait": 4, "speech": [{"say": "Hello?"}]}],
        }
    )
    result = run_scenario(scenario, controls=[])
    assert not result.caller_completed
    assert not result.passed
    assert any("gave up" in c.detail for c in result.checks)


def test_backend_faults_are_injected_under_the_tool_layer():
    scenario = Scenario.model_validate(
        {
            "name": "faulty_backend",
            "model": {
                "greeting": "Hello.",
                "decisions": [
                    {"when": {"user": "refund"}, "tool_calls": [
                        {"name": "issue_refund", "args": {"order_id": "#W2378156", "amount_usd": 5, "reason": "x"}}]},
                    {"when": {"tool": "issue_refund", "result": "failed"}, "say": "That failed."},
                ],
            },
            "faults": [{"tool": "issue_refund", "kind": "raise", "message": "gateway down"}],
            "caller": [{"speech": [{"say": "Refund please."}]}],
            "expect": {"state": [{"sql": "SELECT count(*) FROM refunds", "equals": 0}]},
        }
    )
    result = run_scenario(scenario, controls=[])
    assert result.passed
    assert result.tool_executions == {"issue_refund": 1}
    assert "That failed." in result.model_replies
