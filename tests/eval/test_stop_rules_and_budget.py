"""Sample sizes and budgets: rounds go on until the declared rule is met or the budget would be passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecat_harness.cli import main
from pipecat_harness.eval.intervals import format_interval, wilson_interval
from pipecat_harness.eval.runner import Budget
from pipecat_harness.sim.scenario import BUNDLED_DIR

SCENARIO = str(BUNDLED_DIR / "tools_duplicate_write_same_turn.yaml")


@pytest.mark.parametrize(("count", "trials", "low", "high"), [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634), (1, 2, 0.0945, 0.9055),
    (26, 26, 0.8713, 1.0),
])
def test_wilson_interval_matches_the_published_values(count: int, trials: int, low: float, high: float) -> None:
    interval = wilson_interval(count, trials)
    assert interval is not None
    assert interval == pytest.approx((low, high), abs=1e-3)


def test_no_interval_without_trials_or_for_a_total() -> None:
    assert wilson_interval(0, 0) is None and wilson_interval(1500, 1) is None
    assert format_interval(None) == "" and format_interval((0.1, 0.5)) == "[10%, 50%]"


def test_budget_names_the_limit_the_next_round_would_pass() -> None:
    assert Budget(calls=4).exceeded_by(2, 0, 0.0, 2, (0.0, 0.0)) == ""
    assert "calls" in Budget(calls=3).exceeded_by(2, 0, 0.0, 2, (0.0, 0.0))
    assert "tokens" in Budget(tokens=1000).exceeded_by(2, 800, 0.0, 2, (400.0, 0.0))
    assert "minutes" in Budget(minutes=1).exceeded_by(2, 0, 50.0, 2, (0.0, 10.0))


def test_a_sample_rule_ends_the_rounds_once_the_intervals_are_narrow_enough(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("default:\n  sample: {interval_width: 0.75, min_calls: 2}\n")
    out = tmp_path / "out"
    assert main(["eval", SCENARIO, "--toggle", "tool_gate", "--runs", "10", "--rules", str(rules),
                 "--workers", "1", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    control = results["controls"][0]
    # One call per arm per round: after one round 1/1 is [21%, 100%] (0.79 wide); after two, 2/2 and 0/2
    # are 0.66 wide, so the rule is met and the other eight rounds never run.
    assert control["runs_done"] == 2 and control["sample"]["met"] and control["stopped_early"]
    assert control["on"]["pass_rate_interval_95"] == pytest.approx([0.342, 1.0], abs=1e-3)
    assert results["rounds_done"] == 2


def test_a_budget_ends_an_open_ended_run_and_the_report_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["eval", SCENARIO, "--toggle", "tool_gate", "--budget-calls", "5", "--workers", "1",
                 "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["runs"] == 100 and results["rounds_done"] == 2 and results["calls_simulated"] == 4
    assert results["ended"].startswith("budget of calls") and results["budget"]["calls"] == 5
    printed = capsys.readouterr().out
    assert "2 of 100 round(s) run: budget of calls" in printed
    assert "passed" in printed and "[" in printed  # every rate with its interval
    report = (out / "report.html").read_text()
    assert "budget of calls" in report and "model usage:" in report
