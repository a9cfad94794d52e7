from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipecat_harness.cli import main
from pipecat_harness.trace.html import TIMELINE_COLUMNS, call_header_html, html_page, timeline_html, write_trace_html
from pipecat_harness.trace.timeline import Timeline, TraceEvent
from tests.services import dump_dom, headless_chromium_args

EVENTS = [
    {"t": 0.0, "lane": "call", "kind": "call_started", "call_id": "c-1", "controls": ["tool_gate"],
     "description": "duplicate refund"},
    {"t": 1.0, "lane": "caller", "kind": "asr_final", "text": "refund <b>please</b>"},
    {"t": 1.1, "lane": "caller", "kind": "asr_interim", "text": "refund"},
    {"t": 1.5, "lane": "caller", "kind": "submitted", "text": "refund please"},
    {"t": 1.6, "lane": "model", "kind": "model_input", "messages": [{"role": "user", "content": "refund please"}]},
    {"t": 2.0, "lane": "model", "kind": "generated", "text": "Refunding now."},
    {"t": 2.1, "lane": "tool", "kind": "tool_request", "name": "issue_refund", "tool_call_id": "c1",
     "arguments": {"order_id": "#W1"}},
    {"t": 2.2, "lane": "control", "kind": "decision", "control": "tool_gate", "action": "not_executed",
     "turn_id": 1, "evidence": {"reason_kind": "duplicate"}},
    {"t": 3.0, "lane": "bot", "kind": "assistant_committed", "text": "Refunding now."},
    {"t": 9.0, "lane": "call", "kind": "call_result", "outcome": "pass", "expected": "pass",
     "checks": [{"name": "state", "ok": True, "detail": "got 1"}]},
]


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "call.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n")
    return path


def test_timeline_puts_each_lane_in_its_column_and_escapes_text() -> None:
    table = timeline_html(Timeline(TraceEvent.from_mapping(e) for e in EVENTS))
    assert all(title in table for title, _ in TIMELINE_COLUMNS)
    assert "&lt;b&gt;please&lt;/b&gt;" in table and "<b>please</b>" not in table
    assert "lane-control" in table and "tool_gate: not_executed" in table
    assert "asr_interim" not in table  # per-frame noise stays in the JSONL
    assert "asr_interim" in timeline_html(Timeline(TraceEvent.from_mapping(e) for e in EVENTS), full=True)


def test_trace_html_command_writes_a_page(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "html", str(trace_file)]) == 0
    page = trace_file.with_suffix(".html")
    assert capsys.readouterr().out.strip() == str(page)
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert "outcome <span class=\"pass\">pass</span>" in html


def test_trace_html_command_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "html", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such trace file" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"t": 0, "lane": "call"}\nnot json\n')
    assert main(["trace", "html", str(broken)]) == 2
    assert "broken.jsonl:2" in capsys.readouterr().err


def test_trace_page_renders_in_headless_chromium_with_a_timeline(trace_file: Path, tmp_path: Path) -> None:
    page = write_trace_html(trace_file, tmp_path / "out" / "page.html")
    screenshot = tmp_path / "page.png"
    dom = dump_dom(page, tmp_path / "profile")
    assert "<table class=\"timeline\">" in dom and "tools executed" in dom and "issue_refund" in dom
    subprocess.run([*headless_chromium_args(tmp_path / "profile"), f"--screenshot={screenshot}",
                    "--window-size=1200,900", page.as_uri()], capture_output=True, timeout=90, check=True)
    assert screenshot.stat().st_size > 10_000


def test_every_view_escapes_values_in_text_and_attributes() -> None:
    hostile = '"><script>alert(1)</script>'
    events = [dict(e) for e in EVENTS]
    events[1]["text"] = hostile  # asr_final: a table cell, its tooltip and a swimlane label
    events[6]["name"] = hostile  # tool_request: a swimlane mark's tooltip and label
    events[0]["description"] = hostile  # the call header
    timeline = Timeline(TraceEvent.from_mapping(e) for e in events)
    page = html_page(hostile, call_header_html(timeline) + timeline_html(timeline, full=True))
    assert "<script" not in page and "&lt;script&gt;" in page
    assert '" onmouseover' not in page and page.count("&#34;&gt;&lt;script") >= 4
