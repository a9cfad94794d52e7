"""The bundled input scenarios through the simulator: control on passes, control off shows the failure."""

from __future__ import annotations

import pytest

from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

INPUT_CONTROLS = ("identifier_hold", "spelling", "silent_reply")


@pytest.mark.parametrize(
    "name",
    [
        "input_split_order_number",
        "input_split_email",
        "input_spelled_name",
        "input_split_phone_number",
        "input_silent_confirmation",
    ],
)
def test_control_fixes_the_failure_that_shows_without_it(name: str) -> None:
    scenario = load_scenario(BUNDLED_DIR / f"{name}.yaml")
    assert scenario.control in INPUT_CONTROLS and scenario.expect_without_control == "fail"

    on = run_scenario(scenario, controls=[scenario.control])
    assert on.passed, [c.detail for c in on.checks if not c.ok]
    actions = {d.action for d in on.decisions if d.control == scenario.control}
    assert actions & {"held", "reasked"}
    assert actions & {"merged", "released", "reasked"}

    off = run_scenario(scenario, controls=[])
    assert not off.passed and off.as_expected
    assert off.decisions == []


@pytest.mark.parametrize("name", ["input_complete_ids_not_held", "input_ordinary_sentences"])
def test_input_controls_stay_out_of_the_way(name: str) -> None:
    scenario = load_scenario(BUNDLED_DIR / f"{name}.yaml")
    assert "stay_out_of_the_way" in scenario.tags

    on = run_scenario(scenario, controls=INPUT_CONTROLS)
    off = run_scenario(scenario, controls=[])
    assert on.passed and off.passed
    assert [d for d in on.decisions if d.control in INPUT_CONTROLS] == []
    # Same replies at the same virtual times: the controls added no delay anywhere in the call.
    assert on.model_replies == off.model_replies
    assert on.virtual_secs == pytest.approx(off.virtual_secs, abs=0.05)
