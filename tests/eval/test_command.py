from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecat_harness.cli import main
from pipecat_harness.sim.scenario import BUNDLED_DIR


def bundled(*names: str) -> list[Path]:
    return [BUNDLED_DIR / f"{name}.yaml" for name in names]


def test_eval_command_prints_tables_and_writes_results_and_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = [str(p) for p in bundled("tools_duplicate_write_same_turn")]
    assert main(["eval", *args, "--toggle", "tool_gate", "--runs", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tool_gate: on vs off" in printed and "duplicate writes executed" in printed
    # Off arm: one of two write requests was a duplicate (with the 95 % interval of that rate).
    assert "1/2 = 50% [9%, 91%] · 1 calls" in printed
    assert "keep (minimum benefit): MET" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["controls"][0]["keep"]["met"] is True
    assert (out / "report.html").is_file()

    again = tmp_path / "again"
    code = main(["eval", *args, "--toggle", "tool_gate", "--out", str(again), "--compare", str(out / "results.json")])
    assert code == 0 and "compared with the earlier run" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--toggle", "teleport"], "unknown control"), (["--toggle", "tool_gate", "--runs", "0"], "--runs"),
     (["--toggle", "tool_gate", "--rules", "/nonexistent/rules.yaml"], "cannot read rules"),
     (["/nonexistent/scenario.yaml", "--toggle", "tool_gate"], "cannot read scenario")],
)
def test_eval_command_rejects_bad_input(extra: list[str], message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", *extra, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_eval_exits_1_when_a_stop_rule_is_met_even_with_one_round(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("default:\n  keep: {min_target_reduction: 1}\n  stop: {above: {false_blocks_rate: -1}}\n")
    args = [str(p) for p in bundled("tools_duplicate_write_same_turn")]
    code = main(["eval", *args, "--toggle", "tool_gate", "--runs", "1", "--rules", str(rules),
                 "--out", str(tmp_path / "out"), "--workers", "1"])
    captured = capsys.readouterr()
    assert code == 1
    assert "round 1/1" in captured.err and "STOP RULE MET" in captured.err  # the per-round line
    assert "round 1: 2/2 calls" in captured.err  # progress while the round runs (no terminal: lines)
    assert "stop rule met for tool_gate" in captured.out


def test_compare_refuses_a_run_over_other_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"format": "pipecat-harness-eval/1", "scenarios": ["duplicate_refund",
                                  "split_order_number"], "controls": []}))
    args = [str(p) for p in bundled("tools_duplicate_write_same_turn")]
    code = main(["eval", *args, "--toggle", "tool_gate", "--out", str(tmp_path / "out"), "--compare", str(earlier)])
    err = capsys.readouterr().err
    assert code == 2
    assert "only there: duplicate_refund, split_order_number" in err
    assert "only in this run: tools_duplicate_write_same_turn" in err
    assert not (tmp_path / "out").exists()  # refused before any call ran
