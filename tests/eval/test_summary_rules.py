from __future__ import annotations

from pathlib import Path

import pytest

from pipecat_harness.eval.identifier_splits import InputWaiting
from pipecat_harness.eval.metrics import CallMetrics, HistoryFidelity
from pipecat_harness.eval.rules import RulesError, check_keep, check_stop, load_rules
from pipecat_harness.eval.summary import compare_arms, summarize_arm
from pipecat_harness.eval.tool_checks import ToolChecks


def _call(arm: str, *, passed: bool = True, dup: int = 0, writes: int = 2, false_blocks: int = 0,
          quiet: bool = False, decisions: dict[str, int] | None = None) -> CallMetrics:
    return CallMetrics(scenario="s", domain="retail", arm=arm, run=0, controls=[], passed=passed, expected="pass",
                       stay_out_of_the_way=quiet, input=InputWaiting(user_turns=2),
                       tools=ToolChecks(write_requests=writes, duplicate_writes_executed=dup,
                                        false_blocks=false_blocks),
                       history=HistoryFidelity(), decisions=decisions or {})


def test_figures_carry_count_denominator_and_calls_behind_them() -> None:
    arm = summarize_arm([_call("off", dup=1), _call("off", dup=0), _call("off", writes=0)], "tool_gate")
    figure = arm.figures["duplicate_writes_executed"]
    assert (figure.count, figure.of, figure.calls, figure.rate) == (1, 4, 2, 0.25)
    assert arm.figures["identifiers_submitted_early"].rate is None


def test_acting_in_a_stay_out_call_is_counted_but_forwarding_is_not() -> None:
    calls = [_call("on", quiet=True, decisions={"tool_gate/forwarded": 2}),
             _call("on", quiet=True, decisions={"tool_gate/not_executed": 1}),
             _call("on", decisions={"tool_gate/not_executed": 1})]
    figure = summarize_arm(calls, "tool_gate").out_of_the_way
    assert figure is not None and (figure.count, figure.of) == (1, 2)


def test_keep_rule_met_when_the_target_falls_without_cost() -> None:
    rules = load_rules()
    comparison = compare_arms("tool_gate", [_call("on"), _call("on")], [_call("off", dup=1, passed=False),
                                                                        _call("off")], runs_done=1)
    assert comparison.values["target_reduction"] == 1 and comparison.values["pass_rate_drop"] == -0.5
    keep = check_keep(rules, comparison)
    assert keep.met, keep.checks
    assert not check_stop(rules, comparison).met


def test_keep_rule_not_met_and_stop_rule_met_on_false_blocks() -> None:
    rules = load_rules()
    on = [_call("on", passed=False, false_blocks=1), _call("on", passed=False, false_blocks=1)]
    comparison = compare_arms("tool_gate", on, [_call("off"), _call("off")], runs_done=1)
    keep = check_keep(rules, comparison)
    assert not keep.met
    assert {c.condition for c in keep.checks if not c.met} >= {"target reduction >= 1", "pass rate drop <= 0",
                                                               "false_blocks_rate <= 0"}
    stop = check_stop(rules, comparison)
    assert stop.met and any("false_blocks_rate" in c.condition and c.met for c in stop.checks)


def test_unknown_value_in_a_rule_is_reported_not_ignored(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("default:\n  keep:\n    max: {no_such_value: 1}\n")
    comparison = compare_arms("spelling", [_call("on")], [_call("off")], runs_done=1)
    keep = check_keep(load_rules(path), comparison)
    assert not keep.met and any("unknown value" in c.detail for c in keep.checks)


def test_bad_rules_files_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="cannot read rules"):
        load_rules(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("default:\n  keep:\n    min_target_reducton: 1\n")
    with pytest.raises(RulesError, match="min_target_reducton"):
        load_rules(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(RulesError, match="mapping"):
        load_rules(bad)


def test_bundled_rules_cover_the_call_path_controls() -> None:
    rules = load_rules()
    assert {"identifier_hold", "tool_gate", "history", "spelling", "silent_reply", "all"} <= set(rules.controls)


def test_call_metrics_come_back_from_their_results_file_form() -> None:
    import json

    call = _call("on", dup=1, decisions={"tool_gate/not_executed": 1})
    raw = json.loads(json.dumps(call.to_dict()))
    assert CallMetrics.from_dict(raw) == call
    del raw["interaction"]  # results written before interaction costs were measured
    assert CallMetrics.from_dict(raw).interaction == type(call.interaction)()
