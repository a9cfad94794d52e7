from pathlib import Path

import pytest

from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

SCENARIOS = sorted(Path(BUNDLED_DIR).glob("tools_*.yaml"))


def test_the_tool_scenarios_are_bundled():
    names = {p.stem for p in SCENARIOS}
    assert {"tools_duplicate_write_same_turn", "tools_failed_write_retried", "tools_different_args_pass",
            "tools_timeout_reconciliation", "tools_barge_in_during_write", "tools_late_success_after_timeout"} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
@pytest.mark.parametrize("controls", [["tool_gate"], []], ids=["gate_on", "gate_off"])
def test_scenario_outcome_matches_its_expectation(path, controls):
    scenario = load_scenario(path)
    result = run_scenario(scenario, controls=controls)
    details = "; ".join(f"{c.name}: {c.detail}" for c in result.checks)
    assert result.as_expected, f"{scenario.name} with {controls or 'no controls'}: {result.outcome} ({details})"
    if controls:
        assert result.outcome == "pass"
        assert result.decisions and all(d.control == "tool_gate" for d in result.decisions)
