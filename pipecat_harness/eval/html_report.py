"""The HTML report of an evaluation run: summary tables, rule verdicts, and every call's timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipecat_harness.eval.interaction import interaction_rows
from pipecat_harness.eval.metrics import CallMetrics
from pipecat_harness.eval.runner import EvalRun
from pipecat_harness.eval.table import row_cells, run_lines
from pipecat_harness.trace.html import call_header_html, html_page, timeline_html
from pipecat_harness.trace.render import render
from pipecat_harness.trace.timeline import Timeline

__all__ = ["render_report", "write_report"]


def _anchor(call: CallMetrics) -> str:
    return "call-" + "-".join([call.scenario, f"run{call.run}", *(call.controls or ["none"])])


def _call_view(call: CallMetrics) -> dict[str, Any]:
    """What the page shows of one call: its decisions and, when its trace reads, its timeline."""
    decisions = ", ".join(f"{k}×{v}" for k, v in sorted(call.decisions.items())) or "no decisions"
    view: dict[str, Any] = {"metrics": call, "anchor": _anchor(call), "trace": call.trace, "decisions": decisions}
    view["unreadable"] = view["timeline"] = None
    if call.trace and Path(call.trace).is_file():
        try:
            timeline = Timeline.load(call.trace)
        except ValueError as exc:
            view["unreadable"] = str(exc)
        else:
            view["timeline"] = call_header_html(timeline) + timeline_html(timeline, anchor_prefix=_anchor(call) + "-")
    return view


def render_report(evaluation: EvalRun) -> str:
    """The report as one HTML document; a call shared by several toggles (the full-preset arm) is drawn once."""
    sections: list[dict[str, Any]] = []
    unique: dict[str, CallMetrics] = {}
    for result in evaluation.results:
        calls = sorted(result.calls, key=lambda c: (c.scenario, c.run, c.arm != "on"))
        interaction = interaction_rows(result.calls_of("on"), result.calls_of("off"))
        sections.append({"result": result, "rows": row_cells(result), "interaction": interaction, "calls": calls})
        for call in calls:
            unique.setdefault(_anchor(call), call)
    views = [_call_view(call) for _, call in sorted(unique.items())]
    body = render("pipecat_harness.eval", "report.html", evaluation=evaluation, run_lines=run_lines(evaluation),
                  sections=sections, anchor=_anchor, calls=views)
    return html_page("pipecat-harness evaluation", body)


def write_report(evaluation: EvalRun, path: str | Path) -> Path:
    """Write the report and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(evaluation), encoding="utf-8")
    return path
