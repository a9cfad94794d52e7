"""A missing extra is one sentence naming the extra to install, wherever the core reaches it.

The wheel smoke (``.ci/wheel-smoke``) checks the base install itself; here a library an extra provides is made
unimportable the way pip leaves it (``ModuleNotFoundError`` with the module's name).
"""

import asyncio
import sys

import pytest

import pipecat_harness
from pipecat_harness.cli import main
from pipecat_harness.config import HarnessConfig
from pipecat_harness.errors import UsageError, import_or_name_extra
from pipecat_harness.harness import Harness


def _uninstall(monkeypatch, *modules):
    """Make ``modules`` (and their submodules) fail to import, and forget the harness modules that imported them."""
    for name in list(sys.modules):
        if name.split(".")[0] in modules:
            monkeypatch.delitem(sys.modules, name)
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def _forget(monkeypatch, *prefixes):
    for name in list(sys.modules):
        if name.startswith(prefixes):
            monkeypatch.delitem(sys.modules, name)


def test_a_ledger_url_without_sqlalchemy_names_the_sqlite_extra(monkeypatch, tmp_path):
    _uninstall(monkeypatch, "sqlalchemy")
    config = HarnessConfig().only("tool_gate")
    config.tool_gate.ledger_url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    with pytest.raises(UsageError) as raised:
        Harness(config, call_id="c1", trace_path=None)
    message = str(raised.value)
    assert "tool_gate.ledger_url" in message and 'pip install "pipecat-harness[sqlite]"' in message
    assert "\n" not in message


def test_the_tool_gate_without_a_ledger_needs_no_store_library(monkeypatch):
    _uninstall(monkeypatch, "sqlalchemy", "aiosqlite")
    _forget(monkeypatch, "pipecat_harness.tools", "pipecat_harness.state", "pipecat_harness.business")
    harness = Harness(HarnessConfig.preset("retail"), call_id="c1", trace_path=None)
    assert "tool_gate" in harness.active_controls
    assert "sqlalchemy" not in sys.modules or sys.modules["sqlalchemy"] is None


def test_a_top_level_name_of_an_extra_says_which(monkeypatch):
    _uninstall(monkeypatch, "sqlalchemy")
    _forget(monkeypatch, "pipecat_harness.tools.ledger")
    monkeypatch.delitem(vars(pipecat_harness), "OperationLedger", raising=False)
    monkeypatch.delitem(vars(sys.modules["pipecat_harness.tools"]), "OperationLedger", raising=False)
    with pytest.raises(UsageError, match=r"needs the 'sqlite' extra .* pip install \"pipecat-harness\[sqlite\]\""):
        pipecat_harness.OperationLedger  # noqa: B018


def test_a_command_names_its_own_extra_for_what_it_includes(monkeypatch):
    _uninstall(monkeypatch, "aiosqlite")
    _forget(monkeypatch, "pipecat_harness.demo")
    with pytest.raises(UsageError, match=r"pipecat-harness\[lab\]"):
        import_or_name_extra("pipecat_harness.demo.retail_db", "pipecat-harness simulate", "lab")
    with pytest.raises(UsageError, match=r"pipecat-harness\[sqlite\]"):
        import_or_name_extra("pipecat_harness.demo.retail_db", "the retail demo")


def test_simulate_without_the_lab_extra_exits_2_with_the_sentence(monkeypatch, capsys):
    _uninstall(monkeypatch, "time_machine")
    _forget(monkeypatch, "pipecat_harness.sim", "pipecat_harness.eval", "pipecat_harness.replay")
    assert main(["simulate", "--scenario", "duplicate_refund"]) == 2
    err = capsys.readouterr().err.strip()
    assert 'pip install "pipecat-harness[lab]"' in err and "\n" not in err and "Traceback" not in err


def test_pre_turn_evidence_without_sqlalchemy_names_the_sqlite_extra(monkeypatch):
    _uninstall(monkeypatch, "sqlalchemy")
    _forget(monkeypatch, "pipecat_harness.retrieval")
    config = HarnessConfig.preset("retail")
    config.retrieval.pre_turn = True
    with pytest.raises(UsageError, match=r"retrieval\.pre_turn needs the 'sqlite' extra"):
        Harness(config, call_id="c1", trace_path=None)


def test_a_control_whose_module_needs_an_extra_names_it(monkeypatch):
    _uninstall(monkeypatch, "sqlalchemy")
    _forget(monkeypatch, "pipecat_harness.grader")
    config = HarnessConfig().only("grader")
    config.grader.constraints_path = "bundled:retail"
    with pytest.raises(UsageError, match=r"grader.audit_url needs the 'sqlite' extra"):
        Harness(config, call_id="c1", trace_path=None)


def test_the_grader_package_grades_and_keeps_rows_without_sqlalchemy(monkeypatch):
    _uninstall(monkeypatch, "sqlalchemy", "aiosqlite")
    _forget(monkeypatch, "pipecat_harness.grader")
    import pipecat_harness.grader as grader

    constraints = grader.ConstraintList.load("bundled:retail")
    verdicts = asyncio.run(grader.RuleGrader(constraints).grade("The basic detail is $1.", None))
    row = grader.AuditRow(tenant="acme", call_id="c1", turn_id=1, utterance="hi", caller_utterance=None,
                          verdict=verdicts[0].verdict, category=verdicts[0].category)
    assert grader.TurnGrader.__name__ == "TurnGrader" and row.to_dict()["call_id"] == "c1"
    with pytest.raises(UsageError) as raised:
        grader.AuditStore  # noqa: B018
    message = str(raised.value)
    assert 'pip install "pipecat-harness[sqlite]"' in message and "AuditStore" in message and "\n" not in message
