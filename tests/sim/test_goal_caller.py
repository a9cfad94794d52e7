"""Callers described by goal: played line by line by an LLM caller that reacts to what the bot said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecat_harness.cli import main
from pipecat_harness.fakes.background import serve_in_background
from pipecat_harness.fakes.openai_chat import OpenAIChatFake
from pipecat_harness.sim.caller_goal import CallerGoal, spoken_segments
from pipecat_harness.sim.goal_brain import GoalBrain
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, Scenario, ScenarioError, load_scenario
from pipecat_harness.trace.timeline import Timeline

GOAL_SCENARIO = BUNDLED_DIR / "goal_split_order_number.yaml"
LONG_REPLY = ("Thanks for calling Acme. Before we start, let me tell you about our spring sale on every "
              "thermostat, keyboard and speaker in the catalogue, which runs until the end of the month.")


def _said(timeline: Timeline) -> list[str]:
    return [e.data["said"] for e in timeline.of("caller_turn")]


def test_goal_caller_pauses_inside_the_identifier_and_the_hold_decides_the_outcome(tmp_path: Path) -> None:
    scenario = load_scenario(GOAL_SCENARIO)
    held = run_scenario(scenario, controls=["identifier_hold"], trace_dir=tmp_path / "on")
    unheld = run_scenario(scenario, controls=[], trace_dir=tmp_path / "off")
    assert held.passed and held.as_expected
    assert not unheld.passed and unheld.as_expected  # the pause split the order number: no return booked
    said = _said(Timeline.load(held.trace_path))
    assert said[0] == scenario.caller_goal.reason  # type: ignore[union-attr]
    assert "W two three ... seven eight one five six" in said[1]  # the known fact, spelled as the goal gives it
    assert said[-1].endswith("Goodbye.")  # "[hang up]" ends the call and is not spoken
    # Without the hold the model only ever heard the first half and asked again: the caller reacted to that.
    off_said = _said(Timeline.load(unheld.trace_path))
    assert off_said.count(said[1]) >= 2


def test_goal_caller_cuts_in_once_a_reply_runs_past_its_patience(tmp_path: Path) -> None:
    scenario = Scenario.model_validate({
        "name": "goal_impatient",
        "model": {"greeting": LONG_REPLY, "decisions": [{"when": {"user": "refund"}, "say": "Anything else?"}]},
        "caller_goal": {"reason": "I just want a refund.", "interrupts": {"after_secs": 2.0}, "max_turns": 3},
        "expect": {"caller_completed": False},
    })
    result = run_scenario(scenario, controls=[], trace_dir=tmp_path)
    assert result.playback[0].interrupted  # the caller barged into the greeting
    timeline = Timeline.load(result.trace_path)
    first_turn = timeline.of("caller_turn")[0].t
    assert first_turn == pytest.approx(timeline.of("bot_started_speaking")[0].t + 2.0, abs=0.3)


def test_a_caller_model_plays_the_goal_over_the_openai_protocol_and_arms_share_its_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    goal = load_scenario(GOAL_SCENARIO).caller_goal
    assert goal is not None
    fake = OpenAIChatFake(GoalBrain(goal))
    out = tmp_path / "out"
    with serve_in_background(fake):
        args = ["eval", str(GOAL_SCENARIO), "--toggle", "identifier_hold", "--caller-model", "openai:caller-llm",
                "--caller-base-url", fake.base_url, "--seed", "3", "--workers", "1", "--out", str(out)]
        assert main(args) == 0
        first = len(fake.requests)
        assert main(args) == 0  # the same run again: every line comes from the cache
    assert first > 0 and len(fake.requests) == first
    system = fake.requests[0].messages[0]
    assert system["role"] == "system" and "order number" in system["content"] and "[hang up]" in system["content"]
    assert all(r.raw["seed"] == 3 and r.raw["temperature"] == 0 for r in fake.requests)
    results = json.loads((out / "results.json").read_text())
    assert results["caller_model"]["label"] == "openai:caller-llm"
    assert results["usage"]["caller_requests"] == 0  # the rerun's lines all came from the cache
    control = results["controls"][0]
    assert (control["on"]["passed"], control["off"]["passed"]) == (1, 0)
    turns = sum(len(Timeline.load(c["trace"]).of("caller_turn")) for c in control["calls"])
    # Both arms opened the same way and were answered from one cached line, so fewer requests than turns.
    assert first < turns
    assert "goal callers: openai:caller-llm" in capsys.readouterr().out


def test_spoken_segments_turn_pause_marks_into_pauses() -> None:
    assert spoken_segments("W two three ... seven eight", 1.5) == [
        {"say": "W two three"}, {"pause": 1.5}, {"say": "seven eight"}]
    assert spoken_segments("Yes, please.", 1.0) == [{"say": "Yes, please."}]


def test_goal_brain_answers_from_the_conversation() -> None:
    brain = GoalBrain(CallerGoal(reason="I want a refund.", does_not_know=["the card the order was paid with"],
                                 knows=[{"what": "zip code", "say": "nine four ... one zero five"}]))  # type: ignore[list-item]
    assert brain.next_line([]) == "I want a refund."
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "I want a refund."}]
    assert brain.next_line([*history, {"role": "user", "content": "What's your zip code?"}]).startswith("nine four")
    assert "don't know" in brain.next_line([*history, {"role": "user", "content": "Which card did you use?"}])
    assert "[hang up]" in brain.next_line([*history, {"role": "user", "content": "Anything else?"}])


@pytest.mark.parametrize("caller", [{}, {"caller": [{"speech": [{"say": "hi"}]}], "caller_goal": {"reason": "x"}}])
def test_a_scenario_gives_its_caller_one_way(tmp_path: Path, caller: dict[str, object]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "s", "model": {"greeting": "Hi"}, **caller}))
    with pytest.raises(ScenarioError, match="either as a script"):
        load_scenario(path)


def test_a_caller_model_that_does_not_answer_fails_the_call_without_hanging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    out = tmp_path / "out"
    code = main(["eval", str(GOAL_SCENARIO), "--toggle", "identifier_hold", "--caller-model", "openai:gone",
                 "--caller-base-url", "http://127.0.0.1:9/v1", "--workers", "1", "--out", str(out)])
    assert code == 0
    calls = json.loads((out / "results.json").read_text())["controls"][0]["calls"]
    assert calls and all(not c["passed"] and "Connection" in c["error"] for c in calls)
    assert "simulation error" in capsys.readouterr().out


def test_goal_caller_drives_the_recogniser_when_the_bots_services_run_on_loopback(tmp_path: Path) -> None:
    scenario = load_scenario(GOAL_SCENARIO)
    held = run_scenario(scenario, controls=["identifier_hold"], services="loopback")
    unheld = run_scenario(scenario, controls=[], services="loopback")
    # The transcripts came from DeepgramSTTService reading the fake; the pause still split the order number.
    assert held.passed and not unheld.passed
    assert held.model_usage.requests >= 5 and held.model_usage.total_tokens > 0  # Gemini usage metadata
