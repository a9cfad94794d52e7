from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecat_harness.eval.results import compare_results, load_results, write_results
from pipecat_harness.eval.rules import DecisionRules, load_rules
from pipecat_harness.eval.runner import EvalRun, arm_controls, run_evaluation
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenarios


def bundled(*names: str) -> list[Path]:
    return [BUNDLED_DIR / f"{name}.yaml" for name in names]


def test_arms_differ_only_in_the_toggled_control() -> None:
    on, off = arm_controls("tool_gate", "retail")
    assert "tool_gate" in on and "tool_gate" not in off
    assert set(on) - set(off) == {"tool_gate"}
    full, none = arm_controls("all", "airline")
    assert none == () and {"identifier_hold", "tool_gate"} <= set(full)
    with pytest.raises(ValueError, match="unknown control"):
        arm_controls("teleport", "retail")


def test_tool_gate_run_measures_benefit_and_stays_out_of_the_way(tool_gate_run: tuple[EvalRun, Path]) -> None:
    evaluation, _ = tool_gate_run
    (result,) = evaluation.results
    values = result.comparison.values
    assert (values["target_off"], values["target_on"]) == (1, 0)  # duplicate_refund: one duplicate refund
    assert (result.comparison.on.passed, result.comparison.off.passed) == (2, 1)
    assert result.comparison.on.figures["false_blocks"].count == 0
    quiet = result.comparison.on.out_of_the_way
    assert quiet is not None and (quiet.count, quiet.of) == (0, 1)
    assert result.keep.met and not result.stopped_early
    assert evaluation.calls_simulated == 4 and all(Path(c.trace).is_file() for c in result.calls)


def test_results_json_round_trips_and_two_runs_compare(tool_gate_run: tuple[EvalRun, Path], tmp_path: Path) -> None:
    evaluation, _ = tool_gate_run
    path = write_results(evaluation, tmp_path / "results.json")
    data = load_results(path)
    assert data["controls"][0]["values"]["target_off"] == 1
    assert len(data["controls"][0]["calls"]) == 4
    rows = compare_results(data, data)
    assert rows[0]["control"] == "tool_gate" and rows[0]["target_on"]["delta"] == 0
    with pytest.raises(ValueError, match="not an evaluation results file"):
        (tmp_path / "other.json").write_text(json.dumps({"format": "x"}))
        load_results(tmp_path / "other.json")


def test_a_regression_stops_the_run_early(tmp_path: Path) -> None:
    # Declared up front: any lookup at all is a regression, and split_order_number looks its order up.
    stop = {"stop": {"above": {"lookups_per_call": 0}}}
    rules = DecisionRules.model_validate({"controls": {"identifier_hold": stop}})
    scenarios = load_scenarios(bundled("split_order_number"))
    evaluation = run_evaluation(scenarios, ["identifier_hold"], rules, runs=3, out_dir=tmp_path, workers=1)
    (result,) = evaluation.results
    assert result.stopped_early and result.stop.met
    assert result.comparison.runs_done == 1 and evaluation.calls_simulated == 2


def test_bad_arguments_are_rejected(tmp_path: Path) -> None:
    scenarios = load_scenarios(bundled("duplicate_refund"))
    with pytest.raises(ValueError, match="runs"):
        run_evaluation(scenarios, ["tool_gate"], load_rules(), runs=0, out_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown control"):
        run_evaluation(scenarios, ["nope"], load_rules(), out_dir=tmp_path)
