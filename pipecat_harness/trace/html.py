"""Render call timelines as self-contained HTML (no server, no scripts, no external assets)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pipecat_harness.trace.handoff import build_handoff
from pipecat_harness.trace.render import render, template_text
from pipecat_harness.trace.show import FRAME_EVENT_KINDS, describe_event
from pipecat_harness.trace.swimlanes import SWIMLANE_CSS, history_panel_html, swimlanes_html
from pipecat_harness.trace.timeline import Timeline

__all__ = ["PAGE_CSS", "TIMELINE_COLUMNS", "add_html_parser", "call_header_html", "handoff_html", "html_page",
           "timeline_html", "timeline_table_html", "write_trace_html"]

#: Columns of the timeline: (title, lanes shown in it).
TIMELINE_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("caller said / submitted", ("caller",)), ("model received / generated", ("model",)), ("tools executed", ("tool",)),
    ("played / history kept", ("bot",)), ("control decisions", ("control",)))
PAGE_CSS = template_text("pipecat_harness.trace", "page.css")


def call_header_html(timeline: Timeline) -> str:
    """The call's metadata and simulated outcome, as HTML."""
    return render("pipecat_harness.trace", "call_header.html", call=timeline.call, result=timeline.result)


def timeline_html(timeline: Timeline, *, full: bool = False, anchor_prefix: str = "") -> str:
    """The call as swimlanes, the history decisions side by side, and the table of events (see below)."""
    table = timeline_table_html(timeline, full=full, anchor_prefix=anchor_prefix)
    return swimlanes_html(timeline, anchor_prefix=anchor_prefix) + history_panel_html(timeline) + table


def timeline_table_html(timeline: Timeline, *, full: bool = False, anchor_prefix: str = "") -> str:
    """The call as an HTML table: one row per event (per-frame ones with ``full``), one column per record.

    A row's id is ``anchor_prefix`` (unique per call when a page shows several), ``e`` and the event's index.
    """
    column_of = {lane: i for i, (_, lanes) in enumerate(TIMELINE_COLUMNS) for lane in lanes}
    rows = [{"id": f"{anchor_prefix}e{number}", "event": event, "column": column_of.get(event.lane),
             "text": describe_event(event, width=None),
             "title": json.dumps(event.data, ensure_ascii=False, default=str)}  # the full data as a tooltip
            for number, event in enumerate(timeline) if full or event.kind not in FRAME_EVENT_KINDS]
    return render("pipecat_harness.trace", "timeline_table.html", titles=[t for t, _ in TIMELINE_COLUMNS], rows=rows)


def html_page(title: str, body: str) -> str:
    """A complete, self-contained HTML document around ``body`` (HTML)."""
    css = Markup(PAGE_CSS + SWIMLANE_CSS)
    return render("pipecat_harness.trace", "page.html", title=title, css=css, body=Markup(body))


def write_trace_html(trace: str | Path, output: str | Path | None = None, *, full: bool = False) -> Path:
    """Render one trace as an HTML page (default: beside it, ``.html``); returns its path (``TraceFileError``)."""
    trace = Path(trace)
    timeline = Timeline.load(trace)
    output = Path(output) if output is not None else trace.with_suffix(".html")
    title = f"call timeline: {timeline.call.get('call_id') or trace.stem}"
    header = Markup("<h1>{}</h1>").format(title) + call_header_html(timeline) + handoff_html(timeline)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(html_page(title, header + timeline_html(timeline, full=full)), encoding="utf-8")
    return output


def handoff_html(timeline: Timeline) -> Markup:
    """The call's handoff summary as an HTML section linking each event's table row (empty: nothing to hand off)."""
    lines = build_handoff(timeline).by_section
    return render("pipecat_harness.trace", "handoff_section.html", lines=lines) if lines else Markup("")


def add_html_parser(trace_subparsers: Any) -> None:
    """Register ``trace html FILE`` under the ``trace`` command."""
    parser = trace_subparsers.add_parser("html", help="render a JSONL call timeline as a self-contained HTML page")
    parser.add_argument("file", help="a trace file written by a simulated or real call")
    parser.add_argument("-o", "--output", help="the HTML file (default: the trace path with .html)")
    parser.add_argument("--full", action="store_true", help="include interims and played words")
    parser.set_defaults(func=_html_command)


def _html_command(args: argparse.Namespace) -> int:
    print(write_trace_html(args.file, args.output, full=args.full))
    return 0
