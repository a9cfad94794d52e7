"""The history scenarios as complete simulated calls on a real PipelineWorker."""

from __future__ import annotations

from functools import cache

import pytest

from pipecat_harness.sim.runner import CallResult, run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

WITHOUT_CONTROL_FAILS = [
    "barge_in_after_refund",
    "history_barge_in_word_timestamps",
    "history_repeated_interruption",
    "history_odd_replies",
]
PASS_EITHER_WAY = ["history_barge_in_before_audio", "history_uninterrupted"]


@cache
def _run(name: str, with_history: bool) -> CallResult:
    scenario = load_scenario(BUNDLED_DIR / f"{name}.yaml")
    return run_scenario(scenario, controls=["history", "tool_gate"] if with_history else ["tool_gate"])


def _history_actions(result: CallResult) -> list[str]:
    return [d.action for d in result.decisions if d.control == "history"]


@pytest.mark.parametrize("name", WITHOUT_CONTROL_FAILS + PASS_EITHER_WAY)
def test_passes_with_history_control(name: str) -> None:
    result = _run(name, True)
    assert result.passed, [c for c in result.checks if not c.ok]


@pytest.mark.parametrize("name", WITHOUT_CONTROL_FAILS)
def test_fails_without_history_control(name: str) -> None:
    result = _run(name, False)
    assert not result.passed
    assert result.as_expected


def test_refund_barge_in_keeps_heard_words_and_one_refund() -> None:
    result = _run("barge_in_after_refund", True)
    interrupted = [t for t in result.playback if t.interrupted]
    assert len(interrupted) == 1
    turn = interrupted[0]
    assert turn.unplayed_retained == 0 and turn.played_removed <= 1
    assert "[interrupted by the caller" in turn.retained_text
    assert result.tool_executions.get("issue_refund") == 1
    truncated = [d for d in result.decisions if d.control == "history" and d.action == "truncated"]
    assert len(truncated) == 1
    evidence = truncated[0].evidence
    assert evidence["played_secs"] > 0 and evidence["audio_secs"] > evidence["played_secs"]
    assert evidence["chars_kept"] + evidence["chars_removed"] == len(evidence["generated_text"])


def test_word_timestamp_barge_in_uses_the_word_timings() -> None:
    result = _run("history_barge_in_word_timestamps", True)
    truncated = [d for d in result.decisions if d.control == "history" and d.action == "truncated"]
    assert [d.evidence["method"] for d in truncated] == ["word_timestamps"]


def test_repeated_interruption_removes_twice_then_keeps() -> None:
    result = _run("history_repeated_interruption", True)
    corrections = [a for a in _history_actions(result) if a != "played_in_full"]
    assert corrections == ["removed", "removed", "retained"]


def test_barge_in_before_audio_removes_the_reply_as_pipecat_does() -> None:
    with_control, without = _run("history_barge_in_before_audio", True), _run("history_barge_in_before_audio", False)
    assert [a for a in _history_actions(with_control) if a != "played_in_full"] == ["removed"]
    assert [t.retained_text for t in with_control.playback] == [t.retained_text for t in without.playback]
    assert with_control.tool_executions.get("issue_refund") == 1


def test_uninterrupted_call_is_left_untouched() -> None:
    with_control, without = _run("history_uninterrupted", True), _run("history_uninterrupted", False)
    assert set(_history_actions(with_control)) == {"played_in_full"}
    assert [t.retained_text for t in with_control.playback] == [t.retained_text for t in without.playback]
    assert with_control.model_replies == without.model_replies
