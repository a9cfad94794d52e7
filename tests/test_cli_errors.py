"""Every misuse a new user hits gets one sentence naming the file, field or setting and the fix, and exit 2."""

import os
import subprocess
import sys
import textwrap

import pytest

from pipecat_harness.cli import main

SCENARIO = """
name: {name}
model:
  greeting: "Hello, how can I help?"
  decisions:
    - when: {{user: "hours"}}
      say: "We are open nine to five."
caller:
  - speech: [{{say: "What are your hours?"}}]
"""


def _one_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_invalid_boolean_in_the_environment_names_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("PIPECAT_HARNESS_TOOL_GATE__ENABLED", "maybe")
    assert main(["simulate", "--scenario", "duplicate_refund", "--timeline", "none"]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "PIPECAT_HARNESS_TOOL_GATE__ENABLED" in line and "true or false" in line


def test_grader_offered_by_help_runs_with_the_bundled_constraints(tmp_path, capsys):
    code = main(["simulate", "--scenario", "grader_wrong_price_unexecuted_action", "--controls", "grader",
                 "--traces", str(tmp_path), "--timeline", "none"])
    assert code == 0, capsys.readouterr()
    assert (tmp_path / "grader_audit.db").exists()  # next to the traces, not in the working directory


def test_grader_for_a_domain_without_bundled_constraints_says_what_to_set(tmp_path, capsys):
    code = main(["simulate", "--scenario", "eval_airline_two_fee_refunds", "--controls", "grader",
                 "--traces", str(tmp_path), "--timeline", "none"])
    assert code == 2
    assert "grader.constraints_path" in capsys.readouterr().err


def test_missing_constraints_file_is_one_sentence(tmp_path, capsys):
    config = tmp_path / "harness.yaml"
    config.write_text("grader: {enabled: true, constraints_path: /nowhere/constraints.yaml}\n")
    code = main(["simulate", "--scenario", "duplicate_refund", "--config", str(config),
                 "--traces", str(tmp_path), "--timeline", "none"])
    assert code == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "/nowhere/constraints.yaml" in line and "cannot read constraint list" in line


def test_failing_seed_sql_fails_that_scenario_alone(tmp_path, capsys):
    (tmp_path / "a_bad.yaml").write_text(SCENARIO.format(name="a_bad")
                                         + "database: {sql: [\"INSERT INTO nowhere VALUES (1)\"]}\n")
    (tmp_path / "b_good.yaml").write_text(SCENARIO.format(name="b_good"))
    code = main(["simulate", str(tmp_path), "--traces", str(tmp_path / "traces")])
    captured = capsys.readouterr()
    assert code == 2
    assert "a_bad.yaml: field 'database.sql[0]'" in captured.err and "no such table: nowhere" in captured.err
    assert "b_good" in captured.out and "1 as expected" in captured.out and "1 could not run" in captured.out


def test_trace_show_of_a_directory(tmp_path, capsys):
    (tmp_path / "call.jsonl").write_text('{"t": 0, "lane": "call", "kind": "call_started"}\n')
    assert main(["trace", "show", str(tmp_path)]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "is a directory" in line and "call.jsonl" in line


def test_proxy_with_an_unknown_checklist(capsys):
    assert main(["proxy", "--checklist", "bogus"]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "--checklist" in line and "bogus" in line and "site_check_in" in line


def test_grader_eval_in_llm_mode_without_a_key(monkeypatch, capsys):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert main(["grader", "eval", "--mode", "llm"]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "GOOGLE_API_KEY" in line and "--mode rules" in line


def test_postgresql_url_without_the_postgres_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # as if pipecat-harness[postgres] were not installed
    monkeypatch.setenv("PIPECAT_HARNESS_TOOL_GATE__LEDGER_URL", "postgresql+asyncpg://app@db.internal/ledger")
    assert main(["simulate", "--scenario", "duplicate_refund", "--timeline", "none"]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "PIPECAT_HARNESS_TOOL_GATE__LEDGER_URL" in line and 'pip install "pipecat-harness[postgres]"' in line


def test_synchronous_postgresql_url_says_which_driver(monkeypatch, capsys):
    monkeypatch.setenv("PIPECAT_HARNESS_TOOL_GATE__LEDGER_URL", "postgresql://app:secret@db.internal/ledger")
    assert main(["simulate", "--scenario", "duplicate_refund", "--timeline", "none"]) == 2
    err = capsys.readouterr().err
    assert "postgresql+asyncpg://" in err and "secret" not in err


@pytest.mark.parametrize("command", ["proxy", "console"])
def test_port_out_of_range(command, capsys):
    assert main([command, "--port", "99999"]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert "99999" in line and "1 to 65535" in line


def test_proxy_without_its_extra_says_which_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fastapi", None)
    for name in [m for m in sys.modules if m.startswith("pipecat_harness.proxy")]:
        monkeypatch.delitem(sys.modules, name)
    assert main(["proxy"]) == 2
    line = _one_sentence(capsys.readouterr().err)
    assert 'pip install "pipecat-harness[proxy]"' in line and "fastapi" in line


def test_help_imports_no_subcommand():
    code = textwrap.dedent("""
        import sys
        from pipecat_harness.cli import main
        assert main(["--help"]) == 0
        loaded = [m for m in ("fastapi", "uvicorn", "pipecat_harness.proxy", "pipecat_harness.sim.runner")
                  if m in sys.modules]
        assert not loaded, loaded
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "simulate" in result.stdout and "pipecat-harness[proxy]" in result.stdout


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"name: caf\xe9\n", "is not UTF-8 text (byte 0xe9 at offset 9); save it as UTF-8"),
        (b"a:\n" + b"".join(b"  " * i + b"- \n" for i in range(1, 200)), "nests deeper than 64 levels"),
        (b"[" * 5000 + b"]" * 5000, "nests deeper than 64 levels"),
        (b"name: x\ncaller: [{speech: [{sai: hello}]}]\nmodel: {}\n", "did you mean 'say'?"),
        (b"name: x\ncontrol: tool_gaet\nmodel: {}\ncaller: [{speech: [{say: hi}]}]\n",
         "unknown control 'tool_gaet' (did you mean 'tool_gate'?)"),
        (b"name: x\nmodel: {decisions: [{when: {user: 'order (?P<id>\\\\w+)'}, say: 'ok {order}'}]}\n"
         b"caller: [{speech: [{say: hi}]}]\n", "template '{order}' names no group of when.user (its groups are id)"),
    ],
)
def test_bad_scenario_files_are_one_sentence(tmp_path, capsys, content, problem):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    assert main(["simulate", str(path), "--traces", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(path) in err and problem in err, err


def test_huge_scalar_is_rejected_by_size_before_parsing(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.write(b"name: huge\ndescription: ")
        handle.write(b"x" * (20 * 1024 * 1024))
    assert main(["simulate", str(path)]) == 2
    assert "too large for a scenario" in _one_sentence(capsys.readouterr().err)


def test_unknown_bundled_scenario_suggests_the_closest(capsys):
    assert main(["simulate", "--scenario", "dupliate_refund"]) == 2
    assert "did you mean 'duplicate_refund'?" in _one_sentence(capsys.readouterr().err)
