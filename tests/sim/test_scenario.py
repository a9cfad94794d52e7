from pathlib import Path

import pytest

from pipecat_harness.sim.scenario import ScenarioError, bundled_scenario_paths, load_scenario, load_scenarios

MINIMAL = """
name: minimal
model:
  greeting: Hello
caller:
  - speech: [{say: "hi"}]
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_bundled_scenario_is_valid():
    paths = bundled_scenario_paths()
    assert len(paths) >= 4
    names = {s.name for s in load_scenarios()}
    assert {"split_order_number", "duplicate_refund", "barge_in_after_refund", "silent_confirmation"} <= names


def test_minimal_scenario_gets_defaults(tmp_path):
    scenario = load_scenario(write(tmp_path, MINIMAL))
    assert scenario.domain == "retail"
    assert scenario.caller[0].after == "bot"
    assert scenario.expected_outcome(frozenset()) == "pass"


def test_expected_outcome_depends_on_the_addressing_control(tmp_path):
    scenario = load_scenario(write(tmp_path, MINIMAL + "control: tool_gate\nexpect_without_control: fail\n"))
    assert scenario.expected_outcome(frozenset({"tool_gate"})) == "pass"
    assert scenario.expected_outcome(frozenset({"history"})) == "fail"


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (MINIMAL + "colour: red\n", "colour", "Extra inputs are not permitted"),
        (MINIMAL.replace('{say: "hi"}', '{say: "hi", pause: 1}'), "caller[0].speech[0]", "exactly one"),
        (MINIMAL.replace('{say: "hi"}', '{say: "hi", secs: -1}'), "caller[0].speech[0].secs", "greater than 0"),
        (MINIMAL + "database: {seed: bank}\n", "database.seed", "'retail' or 'empty'"),
        (MINIMAL.replace("greeting: Hello", "decisions: [{when: {user: '(unclosed'}, say: x}]"),
         "model.decisions[0].when.user", "invalid regular expression"),
        (MINIMAL.replace("greeting: Hello", "decisions: [{when: {user: x}}]"), "model.decisions[0]", "say"),
    ],
)
def test_validation_errors_name_file_field_and_problem(tmp_path, text, field, problem):
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    assert f"field '{field}" in message
    assert problem in message


def test_not_yaml_and_not_a_mapping_are_clear_errors(tmp_path):
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(write(tmp_path, "caller: [unclosed"))
    with pytest.raises(ScenarioError, match="must be a mapping"):
        load_scenario(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")


def test_duplicate_names_are_rejected(tmp_path):
    write(tmp_path, MINIMAL, "a.yaml")
    write(tmp_path, MINIMAL, "b.yaml")
    with pytest.raises(ScenarioError, match="already used"):
        load_scenarios([tmp_path])
