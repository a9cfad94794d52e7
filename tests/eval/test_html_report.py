from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipecat_harness.eval.html_report import render_report, write_report
from pipecat_harness.eval.runner import EvalRun


def test_report_has_tables_verdicts_and_one_timeline_per_call(tool_gate_run: tuple[EvalRun, Path]) -> None:
    evaluation, _ = tool_gate_run
    page = render_report(evaluation)
    assert "<script" not in page and "http" not in page.split("</style>")[0]  # self-contained
    assert "duplicate writes executed" in page and "keep (minimum benefit)" in page
    assert page.count("<details id=\"call-") == 4
    assert page.count("class=\"timeline\"") == 4


def test_report_opens_in_headless_chromium_and_shows_a_timeline(
        tool_gate_run: tuple[EvalRun, Path], tmp_path: Path, dump_dom: Callable[[Path], str]) -> None:
    evaluation, _ = tool_gate_run
    dom = dump_dom(write_report(evaluation, tmp_path / "report.html"))
    assert "pipecat-harness evaluation" in dom
    assert dom.count("<table class=\"timeline\">") == 4
    # The timeline shows the four records and the decision that prevented the second refund.
    for column in ("caller said / submitted", "model received / generated", "tools executed",
                   "played / history kept", "control decisions"):
        assert column in dom
    assert "tool_gate: not_executed" in dom and "issue_refund" in dom
