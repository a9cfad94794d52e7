"""Replay of a recorded decision point under treatments, on the bundled recorded call and fresh traces."""

from __future__ import annotations

import json

import pytest

from pipecat_harness.cli import main
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS
from pipecat_harness.replay.actions import ReferenceAction
from pipecat_harness.replay.checks import load_check
from pipecat_harness.replay.command import resolve_trace, scenario_of_trace
from pipecat_harness.replay.decision_point import decision_point, decision_points
from pipecat_harness.replay.treatments import ScriptedSource, ServiceSource, replay_decision
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import load_scenario
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.trace.timeline import Timeline

BUNDLED = "bundled:cancel_two_orders"


class _RecordingSource(ScriptedSource):
    """The scripted model, keeping every service it built so a test can read what the model received."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.services: list[ScriptedLLMService] = []

    def service(self, system_instruction, sample):
        llm = super().service(system_instruction, sample)
        self.services.append(llm)
        return llm


def _bundled():
    path = resolve_trace(BUNDLED)
    timeline = Timeline.load(path)
    return path, timeline, scenario_of_trace(timeline, path, None)


def test_decision_point_is_the_context_the_model_received_with_its_prompt_and_tools():
    _, timeline, scenario = _bundled()
    point = decision_point(timeline, 2)
    assert [m["role"] for m in point.messages] == ["assistant", "user"]
    assert "cancel my orders W two three" in point.newest_user_text
    assert point.system is not None and point.system.startswith(scenario.model.system)
    assert "cancel_pending_order" in {tool["name"] for tool in point.tools}
    assert [c.name for c in point.recorded.tool_calls] == ["cancel_pending_order", "cancel_pending_order"]
    # The request after the tool results carries the whole context again, rebuilt from the deltas.
    third = decision_points(timeline)[2]
    assert third.messages[:2] == point.messages and third.after_tool_results == ["cancel_pending_order"] * 2


def test_treatment_table_on_the_bundled_call_and_the_reference_never_reaches_the_model():
    _, timeline, scenario = _bundled()
    point = decision_point(timeline, 2)
    source = _RecordingSource(scenario.model)
    token = "zq-reference-token"
    reference = ReferenceAction.parse(f"tool:get_order_details|say:why|say:{token}")
    check = load_check("inspect_orders")
    table = replay_decision(point, source, samples=9, check=check, reference=reference,
                            write_tools=RETAIL_WRITE_TOOLS)
    by_name = {r.treatment: r for r in table.results}
    assert [len(r.samples) for r in table.results] == [9, 9, 9]
    # The scripted model mostly repeats the recorded error unless the check answers at the tool call.
    assert by_name["none"].matched <= 2 and by_name["reminder"].matched <= 2
    assert by_name["feedback"].matched >= 7
    fed = [s for s in by_name["feedback"].samples if s.feedback]
    assert fed and all(s.requests == 2 for s in fed)
    assert fed[0].feedback[0]["status"] == "blocked" and "#W2378156, #W4817420" in fed[0].feedback[0]["reason"]
    received = json.dumps([call.messages for llm in source.services for call in llm.calls])
    assert token not in received and "get_order_details|say" not in received
    # The reminder reached the model as part of its system instruction, and only in that treatment.
    systems = [call.messages[0]["content"] for llm in source.services for call in llm.calls]
    assert sum(check.reminder in s for s in systems) == 9
    assert all(s.startswith(scenario.model.system) for s in systems)


def test_samples_vary_with_their_seed_and_repeat_with_the_same_seed():
    _, timeline, scenario = _bundled()
    point = decision_point(timeline, 2)
    check = load_check("inspect_orders")

    def labels(seed: int) -> list[str]:
        table = replay_decision(point, ScriptedSource(scenario.model, seed=seed), treatments=["none"], samples=12,
                                check=check, write_tools=RETAIL_WRITE_TOOLS)
        return [s.next_action.label() for s in table.results[0].samples]

    assert labels(3) == labels(3)
    assert len(set(labels(3))) == 2


def test_tool_gate_feedback_refuses_a_repeated_write_of_a_call_recorded_without_the_gate(tmp_path):
    scenario = load_scenario("pipecat_harness/scenarios/duplicate_refund.yaml")
    result = run_scenario(scenario, controls=[], trace_dir=tmp_path)
    timeline = Timeline.load(result.trace_path)
    point = next(p for p in decision_points(timeline) if len(p.recorded.tool_calls) == 2)
    table = replay_decision(point, ScriptedSource(scenario.model), treatments=["feedback"], samples=1,
                            check=load_check("tool_gate"), write_tools=RETAIL_WRITE_TOOLS)
    sample = table.results[0].samples[0]
    assert [r["status"] for r in sample.feedback] == ["not_run", "not_executed"]
    assert sample.requests == 2


def test_a_provider_service_class_replays_against_the_loopback_gemini_fake():
    pytest.importorskip("google.genai")
    from pipecat.services.google.llm import GoogleLLMService

    from pipecat_harness.fakes.gemini import GeminiFake
    from pipecat_harness.sim.scripted_llm import ScriptedChatModel

    _, timeline, scenario = _bundled()
    point = decision_point(timeline, 2)
    fakes: list[GeminiFake] = []

    async def gemini(system: str | None, sample: int) -> GoogleLLMService:
        # The fake's replies are decided by the scripted brain from the Gemini request it received.
        fake = await GeminiFake(ScriptedChatModel(scenario.model, seed=f"0:{sample}")).start()
        fakes.append(fake)
        return GoogleLLMService(api_key="loopback", http_options=fake.http_options(),
                                settings=GoogleLLMService.Settings(system_instruction=system))

    table = replay_decision(point, ServiceSource("gemini:loopback", gemini), treatments=["none", "feedback"],
                            samples=2, check=load_check("inspect_orders"), write_tools=RETAIL_WRITE_TOOLS,
                            reference=ReferenceAction.parse("tool:get_order_details|say:why"))
    requests = [r for fake in fakes for r in fake.received("request")]
    assert len(requests) == sum(s.requests for r in table.results for s in r.samples)
    assert json.dumps(requests).count("cancel my orders") >= len(requests)
    feedback = table.results[1]
    fed = [s for s in feedback.samples if s.feedback]
    assert fed and all(s.next_action.tool_calls[0].name == "get_order_details" for s in fed
                       if s.next_action.tool_calls)
    assert "retrieve the details" in json.dumps(requests[-1])


def test_replay_command_lists_points_and_prints_the_table(capsys, tmp_path):
    assert main(["replay", BUNDLED, "--list"]) == 0
    assert "#2" in capsys.readouterr().out
    written = tmp_path / "replay.json"
    code = main(["replay", BUNDLED, "--at", "2", "--check", "inspect_orders", "--samples", "3",
                 "--expect", "tool:get_order_details|say:why", "--json", str(written)])
    out = capsys.readouterr().out
    assert code == 0 and "feedback" in out and "reference action (scorer only)" in out
    data = json.loads(written.read_text())
    assert [t["treatment"] for t in data["treatments"]] == ["none", "reminder", "feedback"]
    assert all(t["samples"] == 3 == len(t["runs"]) for t in data["treatments"])
    assert data["recorded"]["tool_calls"][0]["name"] == "cancel_pending_order"


@pytest.mark.parametrize("argv, message", [
    (["--at", "99"], "--at 99"),
    (["--at", "2", "--check", "nope"], "--check nope"),
    (["--at", "2", "--expect", "tool"], "--expect"),
    (["--at", "2", "--treatment", "louder"], "--treatment louder"),
    (["--at", "2", "--model", "gemini"], "--model"),
])
def test_bad_replay_options_are_one_sentence_and_exit_2(capsys, argv, message):
    assert main(["replay", BUNDLED, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_bundled_recorded_call_is_what_its_scenario_records_today(tmp_path):
    path, bundled_timeline, scenario = _bundled()
    fresh = Timeline.load(run_scenario(scenario, trace_dir=tmp_path).trace_path)

    def points(timeline: Timeline) -> list[tuple]:
        # What a replay depends on: the shape of each context, the prompt, the tools and the recorded action
        # (not the wording of tool results, which the tool layer may refine).
        return [([m.get("role") for m in p.messages], p.newest_user_text, p.after_tool_results, p.system,
                 [t["name"] for t in p.tools], p.recorded.label()) for p in decision_points(timeline)]

    assert points(fresh) == points(bundled_timeline), f"re-record {path} with 'simulate' (the trace format moved)"


def test_replay_command_runs_a_real_model_arm_against_the_loopback_openai_fake(monkeypatch, capsys):
    pytest.importorskip("pipecat_harness.sim.model_arm", reason="the evaluation's real-model arm is not installed")
    import asyncio
    import threading

    from pipecat_harness.fakes.openai_chat import OpenAIChatFake
    from pipecat_harness.sim.scripted_llm import ScriptedChatModel

    _, _, scenario = _bundled()
    # The fake serves from its own loop: the command runs the model on a loop of its own, as with a real provider.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    # A provider keeps no state between requests: a fresh brain answers each one.
    fake = asyncio.run_coroutine_threadsafe(
        OpenAIChatFake(lambda request: ScriptedChatModel(scenario.model).reply(request)).start(), loop).result(10)
    monkeypatch.setenv("OPENAI_API_KEY", "loopback")
    try:
        code = main(["replay", BUNDLED, "--at", "2", "--check", "inspect_orders", "--samples", "2",
                     "--treatment", "none,feedback", "--model", "openai:loopback", "--base-url", fake.base_url,
                     "--expect", "tool:get_order_details|say:why"])
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
    out = capsys.readouterr().out
    assert code == 0 and "openai:loopback" in out
    assert len(fake.requests) >= 4  # 2 samples x 2 treatments, plus the requests after the check's feedback
    assert any("retrieve the details" in json.dumps(r.messages) for r in fake.requests)
