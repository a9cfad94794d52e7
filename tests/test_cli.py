from pipecat_harness.cli import main

SCENARIO = """
name: cli_smoke
model:
  greeting: "Hello, how can I help?"
  decisions:
    - when: {user: "hours"}
      say: "We are open nine to five."
caller:
  - speech: [{say: "What are your hours?"}]
"""


def test_simulate_runs_given_scenarios_and_writes_traces(tmp_path, capsys):
    path = tmp_path / "cli_smoke.yaml"
    path.write_text(SCENARIO)
    code = main(["simulate", str(path), "--traces", str(tmp_path / "traces"), "--timeline", "short"])
    out = capsys.readouterr().out
    assert code == 0
    assert "cli_smoke" in out and "as expected" in out and "We are open nine to five." in out
    assert (tmp_path / "traces" / "cli_smoke.jsonl").exists()


def test_simulate_exits_nonzero_when_an_outcome_is_not_as_expected(tmp_path, capsys):
    path = tmp_path / "cli_fail.yaml"
    path.write_text(SCENARIO.replace("cli_smoke", "cli_fail")
                    + 'expect:\n  state:\n    - {sql: "SELECT count(*) FROM refunds", equals: 1}\n')
    assert main(["simulate", str(path), "--traces", str(tmp_path), "--timeline", "none"]) == 1
    assert "NOT AS EXPECTED" in capsys.readouterr().out


def test_invalid_scenario_names_file_and_field(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text(SCENARIO + "caller_typo: 1\n")
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "broken.yaml" in err and "caller_typo" in err


def test_unknown_control_is_rejected(capsys):
    assert main(["simulate", "--controls", "teleport"]) == 2
    assert "unknown control" in capsys.readouterr().err
