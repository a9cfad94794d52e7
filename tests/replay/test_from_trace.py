"""A recorded call becomes a scenario: simulated call -> trace -> scenario -> simulate gives the same call."""

from __future__ import annotations

import json

import pytest
import yaml

from pipecat_harness.cli import main
from pipecat_harness.replay.from_trace import scenario_from_trace
from pipecat_harness.sim.runner import CallResult, run_scenario
from pipecat_harness.sim.scenario import Scenario, load_scenario
from pipecat_harness.trace.timeline import Timeline, TraceEvent


def _bundled(name: str) -> Scenario:
    return load_scenario(f"pipecat_harness/scenarios/{name}.yaml")


def _decisions(result: CallResult) -> list[tuple[str, str]]:
    return [(d.control, d.action) for d in result.decisions]


@pytest.mark.parametrize("name, controls", [
    ("duplicate_refund", None),
    ("barge_in_after_refund", None),
    ("barge_in_after_refund", []),
    ("split_order_number", None),
    ("silent_confirmation", []),
])
def test_round_trip_gives_the_same_outcome_decisions_and_replies(tmp_path, name, controls):
    scenario = _bundled(name)
    recorded = run_scenario(scenario, controls=controls, trace_dir=tmp_path / "recorded")
    raw = scenario_from_trace(Timeline.load(recorded.trace_path), source=scenario)
    replayed = run_scenario(Scenario.model_validate(raw), controls=controls, trace_dir=tmp_path / "replayed")
    assert replayed.outcome == recorded.outcome
    assert _decisions(replayed) == _decisions(recorded)
    assert replayed.model_replies == recorded.model_replies
    assert replayed.tool_executions == recorded.tool_executions


def test_caller_side_is_the_recorded_speech_pauses_barge_ins_and_silence(tmp_path):
    recorded = run_scenario(_bundled("barge_in_after_refund"), trace_dir=tmp_path)
    turns = scenario_from_trace(Timeline.load(recorded.trace_path))["caller"]
    assert [t["after"] for t in turns] == ["bot", "bot_started", "bot"]
    assert turns[1]["delay"] == pytest.approx(7.0, abs=0.01)
    split = run_scenario(_bundled("split_order_number"), controls=[], trace_dir=tmp_path)
    first = scenario_from_trace(Timeline.load(split.trace_path))["caller"][0]["speech"]
    assert [next(iter(s)) for s in first][:3] == ["say", "pause", "say"]
    silent = run_scenario(_bundled("silent_confirmation"), trace_dir=tmp_path)
    speech = [s for t in scenario_from_trace(Timeline.load(silent.trace_path))["caller"] for s in t["speech"]]
    assert any("silent" in s for s in speech)


def test_a_trace_without_turn_markers_or_source_scenario_gives_the_same_caller(tmp_path):
    recorded = run_scenario(_bundled("barge_in_after_refund"), trace_dir=tmp_path)
    timeline = Timeline.load(recorded.trace_path)
    # What a bot's trace on a real line holds: no simulator bookkeeping.
    bare = Timeline([e for e in timeline if e.kind not in {"caller_turn", "turn_playback", "call_result"}])
    assert scenario_from_trace(bare)["caller"] == scenario_from_trace(timeline)["caller"]
    raw = scenario_from_trace(bare)
    assert raw["model"]["system"].startswith("You are a helpful") and "ASYNC TOOLS" not in raw["model"]["system"]
    Scenario.model_validate(raw)


def test_a_failure_recorded_without_its_control_replays_with_the_control_on_and_off(tmp_path):
    scenario = _bundled("duplicate_refund")
    recorded = run_scenario(scenario, controls=[], trace_dir=tmp_path / "line")
    assert recorded.outcome == "fail"
    replay = Scenario.model_validate(scenario_from_trace(Timeline.load(recorded.trace_path), source=scenario))
    assert run_scenario(replay, controls=[]).outcome == "fail"
    assert run_scenario(replay, controls=["tool_gate"]).outcome == "pass"


def test_scenario_from_trace_command_writes_a_file_simulate_runs(tmp_path, capsys):
    recorded = run_scenario(_bundled("duplicate_refund"), trace_dir=tmp_path)
    out = tmp_path / "replayed.yaml"
    assert main(["scenario", "from-trace", str(recorded.trace_path), "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["name"] == "duplicate_refund_replayed"
    assert main(["simulate", str(out), "--traces", str(tmp_path / "t"), "--timeline", "none"]) == 0
    capsys.readouterr()
    assert main(["scenario", "from-trace", str(recorded.trace_path), "--live-model"]) == 0
    assert "decisions" not in yaml.safe_load(capsys.readouterr().out)["model"]
    assert main(["scenario", "from-trace", str(recorded.trace_path), "--model", "gemini:gemini-2.5-flash"]) == 0
    live = yaml.safe_load(capsys.readouterr().out)
    assert "decisions" not in live["model"] and "eval --model gemini:gemini-2.5-flash" in live["description"]
    assert main(["scenario", "from-trace", str(recorded.trace_path), "--model", "gpt"]) == 2


def test_scenario_from_trace_refuses_a_trace_without_caller_speech(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_text(json.loads(json.dumps(TraceEvent(0.0, "call", "call_started").to_json())) + "\n")
    assert main(["scenario", "from-trace", str(path)]) == 2
    assert "no caller speech" in capsys.readouterr().err
