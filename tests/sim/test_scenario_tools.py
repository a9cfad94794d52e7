"""Scenarios bring their own tools and tables; a user can write one from the README alone."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pipecat_harness.demo.retail_tools import RetailTools
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import RETAIL_TOOL_NAMES, ScenarioError, load_scenario, load_scenarios

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_example(tmp_path: Path) -> Path:
    text = README.read_text()
    block = re.search(r"<!-- scenario-example[^>]*-->\n```yaml\n(.*?)```", text, re.S)
    assert block, "the README's scenario example is marked <!-- scenario-example -->"
    path = tmp_path / "hotel_double_charge.yaml"
    path.write_text(block.group(1))
    return path


def test_the_readme_scenario_runs_with_its_own_tools_and_tables(tmp_path: Path) -> None:
    scenario = load_scenario(_readme_example(tmp_path))
    on = run_scenario(scenario, trace_dir=tmp_path / "on")
    assert on.passed and on.as_expected, on.checks
    assert "refund_night" in on.write_tools and "get_stay" not in on.write_tools
    assert on.tool_executions == {"get_stay": 1, "refund_night": 1}  # the gate kept the duplicate from running
    off = run_scenario(scenario, controls=[], trace_dir=tmp_path / "off")
    assert not off.passed and off.as_expected  # without the controls every request ran: the one held for
    assert off.tool_executions["refund_night"] == 3  # the guest's confirmation, then both of the duplicate pair


def test_a_python_tool_is_called_with_the_database_and_arguments(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "parcel_tools.py").write_text(
        "async def track(db, arguments):\n"
        "    status = await db.scalar('SELECT status FROM parcels WHERE id = ?', (arguments['parcel'],))\n"
        "    return {'status': status or 'unknown'}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "parcel_tools", raising=False)
    path = tmp_path / "parcel.yaml"
    path.write_text("""
name: parcel
database:
  seed: empty
  tables:
    parcels: {columns: {id: TEXT PRIMARY KEY, status: TEXT}, rows: [{id: P1, status: in transit}]}
own_tools:
  - {name: track, parameters: {parcel: {type: string}}, required: [parcel], python: "parcel_tools:track"}
model:
  decisions:
    - when: {user: "parcel"}
      tool_calls: [{name: track, args: {parcel: P1}}]
    - when: {tool: track, result: "in transit"}
      say: "It is in transit."
caller:
  - after: start
    speech: [{say: "Where is my parcel?"}]
expect:
  caller_completed: false
""")
    result = run_scenario(load_scenario(path), trace_dir=tmp_path)
    assert result.tool_executions == {"track": 1}
    assert "It is in transit." in result.model_replies


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("own_tools:\n  - {name: lookup, sql: 'SELECT 1', python: 'a:b'}\n", "give exactly one of 'sql'"),
        ("own_tools:\n  - {name: lookup, sql: 'SELECT * FROM t WHERE id = :id'}\n", "sql binds :id"),
        ("database: {seed: empty, tables: {t: {columns: {id: TEXT}, rows: [{idd: 1}]}}}\n",
         "rows[0] has idd, which are not columns (id)"),
        ("database: {tables: {'bad name': {columns: {id: TEXT}}}}\n", "not an SQL identifier"),
        ("faults: [{tool: isue_refund}]\n",
         "faults[0].tool: unknown tool 'isue_refund' (did you mean 'issue_refund'?)"),
    ],
)
def test_bad_tool_and_table_declarations_name_the_field(tmp_path: Path, extra: str, problem: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nmodel: {greeting: hi}\ncaller: [{speech: [{say: hi}]}]\n" + extra)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_an_unknown_tool_in_a_tool_call_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ndatabase: {seed: empty}\nmodel: {decisions: [{tool_calls: [{name: issue_refund}]}]}\n"
                    "caller: [{speech: [{say: hi}]}]\n")
    with pytest.raises(ScenarioError, match=r"model.decisions\[0\].tool_calls\[0\].name: unknown tool 'issue_refund' "
                                            r"\(declare it under 'tools:'\)"):
        load_scenario(path)


def test_a_broken_table_definition_fails_that_scenario(tmp_path: Path) -> None:
    path = tmp_path / "bad_table.yaml"
    path.write_text("name: bad_table\ndatabase: {seed: empty, tables: {t: {columns: {id: NOT A TYPE ((}}}}\n"
                    "model: {greeting: hi}\ncaller: [{speech: [{say: hi}]}]\n")
    with pytest.raises(ScenarioError, match=r"field 'database.tables.t': cannot create the table"):
        run_scenario(load_scenario(path))


def test_retail_tool_names_are_the_retail_tools() -> None:
    assert set(RETAIL_TOOL_NAMES) == set(RetailTools.handlers(RetailTools(None)))  # type: ignore[arg-type]


def test_airline_and_telecom_scenarios_use_their_own_tools_and_tables() -> None:
    scenarios = [s for s in load_scenarios() if s.name.startswith(("eval_airline_", "eval_telecom_"))]
    assert len(scenarios) >= 10
    for scenario in scenarios:
        if scenario.domain in {"airline", "telecom"}:
            assert scenario.database.seed == "empty" and scenario.database.tables and scenario.own_tools, scenario.name
            assert not set(scenario.tool_names()) & set(RETAIL_TOOL_NAMES), scenario.name


def test_the_filters_a_scenario_may_name_are_the_scripted_models() -> None:
    from pipecat_harness.sim import model_reading
    from pipecat_harness.sim.scenario import TEMPLATE_FILTERS

    assert set(TEMPLATE_FILTERS) == set(model_reading.FILTERS)
