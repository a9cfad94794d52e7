"""Interaction costs from every call's timeline: latency, yielding, talking over, requests, per-domain pass rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecat_harness.eval.identifier_splits import InputWaiting
from pipecat_harness.eval.interaction import domain_pass_rates, interaction_summary, measure_interaction
from pipecat_harness.eval.metrics import CallMetrics, HistoryFidelity
from pipecat_harness.eval.results import results_to_dict
from pipecat_harness.eval.runner import EvalRun
from pipecat_harness.eval.table import print_report
from pipecat_harness.eval.tool_checks import ToolChecks
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import load_scenario
from pipecat_harness.trace.timeline import Timeline, TraceEvent


def _timeline(*events: tuple[float, str, str]) -> Timeline:
    return Timeline([TraceEvent(t, lane, kind, {"stop_secs": 0.2} if kind == "speech_stopped" else {})
                     for t, lane, kind in events])


def test_figures_of_a_timeline_with_known_answers():
    timeline = _timeline(
        (1.0, "caller", "speech_started"), (3.4, "caller", "speech_stopped"),      # speech ends at 3.2
        (3.9, "model", "model_input"),
        (4.0, "bot", "bot_started_speaking"),                                       # answered 800 ms later
        (6.0, "caller", "speech_started"), (6.3, "bot", "bot_stopped_speaking"),   # barge-in, yields in 300 ms
        (7.2, "caller", "speech_stopped"),
        (10.0, "caller", "speech_started"), (10.5, "bot", "bot_started_speaking"),  # bot starts over the caller
        (11.2, "caller", "speech_stopped"),
        (13.0, "caller", "speech_started"), (14.2, "caller", "speech_stopped"),    # speaks over it: no yield
        (16.0, "bot", "bot_stopped_speaking"),
        (16.1, "model", "model_input"),
    )
    costs = measure_interaction(timeline)
    assert costs.caller_stretches == 4
    assert costs.response_latencies_ms[0] == 800
    assert costs.barge_ins == 2 and costs.yielded == 1 and costs.yield_latencies_ms == [300]
    # 0.3 s (first barge-in) + 0.5 s (10.5-11.0) + 1.0 s (13.0-14.0) of bot audio over caller speech.
    assert costs.talk_over_ms == 1800
    assert costs.bot_started_over_caller == 1
    assert costs.model_requests == 2


def test_a_simulated_barge_in_is_a_yield_and_requests_match_what_the_provider_received(tmp_path):
    scenario = load_scenario("pipecat_harness/scenarios/barge_in_after_refund.yaml")
    result = run_scenario(scenario, trace_dir=tmp_path, services="loopback")
    timeline = Timeline.load(result.trace_path)
    costs = measure_interaction(timeline)
    assert costs.barge_ins == 1 and costs.yielded == 1
    # Ground truth from the other side of the wire: the requests the Gemini fake received.
    received = [e for e in timeline.of("gemini_received") if e.data.get("message") == "request"]
    assert received and costs.model_requests == len(received)
    # Every caller turn that got an answer has a latency, none negative.
    assert len(costs.response_latencies_ms) == len(scenario.caller)
    assert all(ms >= 0 for ms in costs.response_latencies_ms)


def _call(domain: str, passed: bool, **interaction: object) -> CallMetrics:
    from pipecat_harness.eval.interaction import InteractionCosts

    return CallMetrics(scenario=f"{domain}-{passed}", domain=domain, arm="on", run=0, controls=[], passed=passed,
                       expected="pass", stay_out_of_the_way=False, input=InputWaiting(added_wait_ms=500),
                       tools=ToolChecks(), history=HistoryFidelity(),
                       interaction=InteractionCosts(**interaction))  # type: ignore[arg-type]


def test_domain_pass_rates_weigh_each_domain_equally():
    calls = [_call("retail", True), _call("retail", True), _call("retail", True), _call("airline", False)]
    rates = domain_pass_rates(calls)
    assert rates["domains"]["retail"] == {"passed": 3, "calls": 3, "rate": 1.0}
    assert rates["equal_weight_mean"] == pytest.approx(0.5)  # not 3/4: each domain counts once
    summary = interaction_summary([_call("retail", True, response_latencies_ms=[100, 300, 900], model_requests=4)])
    assert summary["response_latency_ms"]["p50"] == 300 and summary["model_requests_per_call"] == 4
    assert summary["added_wait_ms"] == 500


def test_eval_prints_and_writes_the_interaction_costs_of_both_arms(tool_gate_run: tuple[EvalRun, Path], capsys):
    from rich.console import Console

    evaluation, _ = tool_gate_run
    print_report(evaluation, Console(width=200))
    printed = capsys.readouterr().out
    assert "tool_gate: interaction costs, on vs off" in printed
    assert "response latency p50 / p90" in printed and "passed: equal-weight mean of domains" in printed
    data = json.loads(json.dumps(results_to_dict(evaluation), default=str))
    interaction = data["controls"][0]["interaction"]
    assert interaction["on"]["calls"] == interaction["off"]["calls"] == 2
    assert interaction["on"]["model_requests"] > 0 and interaction["on"]["responses"] > 0
    call = data["controls"][0]["calls"][0]
    assert CallMetrics.from_dict(call).interaction.model_requests == call["interaction"]["model_requests"]
