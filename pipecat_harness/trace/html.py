"""Render call timelines as self-contained HTML (no server, no scripts, no external assets)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pipecat_harness.trace.handoff import SECTIONS, build_handoff
from pipecat_harness.trace.render import render, template_text
from pipecat_harness.trace.show import describe_event
from pipecat_harness.trace.swimlanes import SWIMLANE_CSS, history_panel_html, swimlanes_html
from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = [
    "PAGE_CSS",
    "TIMELINE_COLUMNS",
    "add_html_parser",
    "call_header_html",
    "handoff_html",
    "html_page",
    "timeline_html",
    "timeline_table_html",
    "write_trace_html",
]

#: Columns of the timeline: (title, lanes shown in it).
TIMELINE_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("caller said / submitted", ("caller",)),
    ("model received / generated", ("model",)),
    ("tools executed", ("tool",)),
    ("played / history kept", ("bot",)),
    ("control decisions", ("control",)),
)
# Per-frame noise left out of the page (the JSONL keeps it).
_OMITTED = {"asr_interim", "played_text", "user_turn_started", "user_turn_stopped", "decision_outcome",
            "speech_started", "speech_stopped"}

PAGE_CSS = template_text("pipecat_harness.trace", "page.css")


def _cell_text(event: TraceEvent) -> str:
    return describe_event(event, width=None)


def call_header_html(timeline: Timeline) -> str:
    """The call's metadata and simulated outcome, as HTML."""
    return render("pipecat_harness.trace", "call_header.html", call=timeline.call, result=timeline.result)


def timeline_html(timeline: Timeline, *, full: bool = False, anchor_prefix: str = "") -> str:
    """The call as swimlanes on one time axis, the history decisions side by side, and the table of events.

    Args:
        timeline: The call timeline.
        full: Keep per-frame events (interim transcripts, played words) in the table.
        anchor_prefix: Prefix of the rows' ids (unique per call when a page shows several).
    """
    return (swimlanes_html(timeline, anchor_prefix=anchor_prefix) + history_panel_html(timeline)
            + timeline_table_html(timeline, full=full, anchor_prefix=anchor_prefix))


def timeline_table_html(timeline: Timeline, *, full: bool = False, anchor_prefix: str = "") -> str:
    """The call as an HTML table: one row per event, one column per record plus decisions.

    Args:
        timeline: The call timeline.
        full: Keep per-frame events (interim transcripts, played words).
        anchor_prefix: Prefix of the rows' ids; a row's id is the prefix, ``e`` and the event's index.
    """
    column_of = {lane: i for i, (_, lanes) in enumerate(TIMELINE_COLUMNS) for lane in lanes}
    rows = [
        {"id": f"{anchor_prefix}e{number}", "t": event.t, "column": column_of.get(event.lane), "lane": event.lane,
         "kind": event.kind, "text": _cell_text(event), "title": _title(event)}
        for number, event in enumerate(timeline) if full or event.kind not in _OMITTED
    ]
    return render("pipecat_harness.trace", "timeline_table.html", titles=[t for t, _ in TIMELINE_COLUMNS], rows=rows)


def _title(event: TraceEvent) -> str:
    """Full event data as a tooltip."""
    return json.dumps(event.data, ensure_ascii=False, default=str)


def html_page(title: str, body: str) -> str:
    """A complete, self-contained HTML document around ``body`` (HTML)."""
    return render("pipecat_harness.trace", "page.html", title=title, css=Markup(PAGE_CSS + SWIMLANE_CSS),
                  body=Markup(body))


def write_trace_html(trace: str | Path, output: str | Path | None = None, *, full: bool = False) -> Path:
    """Render one trace file as an HTML page and return where it was written.

    Args:
        trace: The JSONL trace.
        output: The HTML file (default: the trace's path with ``.html``).
        full: Keep per-frame events.

    Raises:
        TraceFileError: No such trace, or it is not valid JSONL.
    """
    trace = Path(trace)
    timeline = Timeline.load(trace)
    output = Path(output) if output is not None else trace.with_suffix(".html")
    title = f"call timeline: {timeline.call.get('call_id') or trace.stem}"
    body = (Markup("<h1>{}</h1>").format(title) + call_header_html(timeline) + handoff_html(timeline)
            + timeline_html(timeline, full=full))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(html_page(title, body), encoding="utf-8")
    return output


def handoff_html(timeline: Timeline) -> Markup:
    """The call's handoff summary as an HTML section (empty when nothing verified is to hand off).

    Each link jumps to its event's row in the page's timeline table (``e<index>``).
    """
    lines = build_handoff(timeline).lines
    ordered = [line for section in SECTIONS for line in lines if line.section == section]
    return render("pipecat_harness.trace", "handoff_section.html", lines=ordered) if ordered else Markup("")


def add_html_parser(trace_subparsers: Any) -> None:
    """Register ``trace html FILE`` under the ``trace`` command."""
    parser = trace_subparsers.add_parser("html", help="render a JSONL call timeline as a self-contained HTML page")
    parser.add_argument("file", help="a trace file written by a simulated or real call")
    parser.add_argument("-o", "--output", help="the HTML file (default: the trace path with .html)")
    parser.add_argument("--full", action="store_true", help="include interims and played words")
    parser.set_defaults(func=_html_command)


def _html_command(args: argparse.Namespace) -> int:
    output = write_trace_html(args.file, args.output, full=args.full)
    print(output)
    return 0
