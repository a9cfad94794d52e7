from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import load_scenarios
from pipecat_harness.trace.html import write_trace_html
from pipecat_harness.trace.show import render_timeline
from pipecat_harness.trace.swimlanes import SWIMLANES, swimlanes_html
from pipecat_harness.trace.timeline import Timeline
from tests.services import dump_dom, headless_chromium_args


@pytest.fixture(scope="module")
def barge_in_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled barge-in call, simulated with every default control on."""
    out = tmp_path_factory.mktemp("barge-in")
    result = run_scenario(load_scenarios(["barge_in_after_refund"])[0], trace_dir=out)
    assert result.as_expected and result.trace_path is not None
    return result.trace_path


def _history_decision(trace: Path) -> dict:
    decisions = [json.loads(line) for line in trace.read_text().splitlines()]
    return next(d for d in decisions if d["kind"] == "decision" and d.get("action") == "truncated")["evidence"]


def test_every_lane_is_drawn_and_every_mark_links_to_a_table_row(barge_in_trace: Path, tmp_path: Path) -> None:
    page = write_trace_html(barge_in_trace, tmp_path / "call.html").read_text()
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert all(f">{lane}</text>" in svg for lane in SWIMLANES)
    assert 'class="audio-cut"' in svg and 'class="interrupt"' in svg  # the barge-in, on the bot's audio
    assert 'class="tool-ok"' in svg and "issue_refund" in svg
    assert 'class="kept"' in svg and 'class="generated"' in svg  # history kept vs generated
    targets = set(re.findall(r'href="#(e\d+)"', svg))
    rows = set(re.findall(r'<tr id="(e\d+)"', page))
    assert targets and targets <= rows
    assert "<script" not in page


def test_history_decision_shows_generated_heard_and_kept_text_uncut(barge_in_trace: Path, tmp_path: Path) -> None:
    evidence = _history_decision(barge_in_trace)
    assert evidence["heard_text"] != evidence["generated_text"]
    page = write_trace_html(barge_in_trace, tmp_path / "call.html").read_text()
    panel = page[page.index("History after interruptions"):]
    for key in ("generated_text", "heard_text", "retained_text"):
        assert f">{evidence[key]}<" in panel or f"<b>{evidence[key]}</b>" in panel
    assert evidence["pipecat_committed_text"] in panel  # labelled as what Pipecat committed before the fix


def test_terminal_full_timeline_cuts_nothing(barge_in_trace: Path) -> None:
    from rich.console import Console

    console = Console(width=100, record=True)
    render_timeline(Timeline.load(barge_in_trace), console=console, full=True)
    text = " ".join(console.export_text().split())
    assert _history_decision(barge_in_trace)["retained_text"] in text
    assert "…" not in text


def test_short_terminal_timeline_leaves_out_routine_lines(barge_in_trace: Path) -> None:
    from rich.console import Console

    console = Console(width=200, record=True)
    render_timeline(Timeline.load(barge_in_trace), console=console)
    text = console.export_text()
    assert "played_in_full" not in text and '{"bot_speaking": false}' not in text
    assert "truncated" in text


def test_swimlanes_of_a_call_without_events_render() -> None:
    assert "<svg" in swimlanes_html(Timeline([]))


def test_swimlanes_screenshot_in_headless_chromium(barge_in_trace: Path, tmp_path: Path) -> None:
    from PIL import Image

    page = write_trace_html(barge_in_trace, tmp_path / "call.html")
    dom = dump_dom(page, tmp_path / "profile")
    evidence = _history_decision(barge_in_trace)
    assert 'class="swimlanes"' in dom and evidence["heard_text"] in dom and evidence["retained_text"] in dom
    screenshot = tmp_path / "barge_in_after_refund.png"
    subprocess.run([*headless_chromium_args(tmp_path / "profile"), f"--screenshot={screenshot}",
                    "--window-size=1400,900", page.as_uri()], capture_output=True, timeout=90, check=True)
    image = Image.open(screenshot).convert("RGB")
    colours = {colour: count for count, colour in image.getcolors(maxcolors=1 << 20) or []}
    # The lanes' fills are on screen: caller speech, bot audio, history kept, the interruption line.
    for hex_colour in ("#7cc4ea", "#5fbf73", "#2e8b57", "#d2463c"):
        rgb = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        assert colours.get(rgb, 0) > 50, hex_colour
