"""The HTML report of an evaluation run: summary tables, rule verdicts, and every call's timeline.

The page is one self-contained file (inline CSS, no scripts, no server). Per
toggled control it shows the same table as the terminal, the decision rules
with which conditions were met, and per call (scenario × run × arm) a
collapsible timeline of the four records and the control decisions, read from
the call's trace file.
"""

from __future__ import annotations

import html
from pathlib import Path

from pipecat_harness.eval.interaction import interaction_rows
from pipecat_harness.eval.metrics import CallMetrics
from pipecat_harness.eval.rules import RuleVerdict
from pipecat_harness.eval.runner import ControlResult, EvalRun
from pipecat_harness.eval.table import row_cells, run_lines
from pipecat_harness.trace.html import call_header_html, html_page, timeline_html
from pipecat_harness.trace.timeline import Timeline

__all__ = ["render_report", "write_report"]


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _verdict_html(title: str, verdict: RuleVerdict, *, good_when_met: bool = True) -> str:
    def css(met: bool) -> str:
        return "pass" if met == good_when_met else "fail"

    items = "".join(
        f"<li class=\"{css(c.met)}\">{'met' if c.met else 'not met'}: {_esc(c.condition)} "
        f"<span class=\"meta\">({_esc(c.detail)})</span></li>" for c in verdict.checks)
    state = f"<span class=\"{css(verdict.met)}\">{'MET' if verdict.met else 'not met'}</span>"
    return f"<p>{_esc(title)}: {state}</p><ul>{items}</ul>"


def _summary_html(result: ControlResult, scenarios: int) -> str:
    comparison = result.comparison
    rows = "".join(
        f"<tr class=\"{role}\"><td>{_esc(group)}</td><td>{_esc(label)}</td><td>{_esc(role)}</td>"
        f"<td>{_esc(on)}</td><td>{_esc(off)}</td></tr>"
        for group, label, role, on, off in row_cells(result))
    interaction = "".join(
        f"<tr><td>{_esc(label)}</td><td>{_esc(on)}</td><td>{_esc(off)}</td></tr>"
        for label, on, off in interaction_rows([c for c in result.calls if c.arm == "on"],
                                               [c for c in result.calls if c.arm == "off"]))
    stopped = " <span class=\"fail\">run stopped early</span>" if result.stopped_early else ""
    return (f"<p class=\"meta\">{scenarios} scenarios × {comparison.runs_done} run(s) = "
            f"{comparison.on.calls} calls per arm{stopped}</p>"
            "<table><thead><tr><th>group</th><th>figure</th><th>role</th><th>on</th><th>off</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            "<h3>interaction costs</h3><table><thead><tr><th>figure</th><th>on</th><th>off</th></tr></thead>"
            f"<tbody>{interaction}</tbody></table>"
            + _verdict_html("keep (minimum benefit)", result.keep)
            + _verdict_html("stop (regression)", result.stop, good_when_met=False)
            + (_verdict_html("sample (enough calls)", result.sample) if result.sample.checks else ""))


def _anchor(call: CallMetrics) -> str:
    return "call-" + "-".join([call.scenario, f"run{call.run}", *(call.controls or ["none"])])


def _call_link(call: CallMetrics) -> str:
    css = "pass" if call.passed else "fail"
    return (f"<tr><td>{_esc(call.scenario)}</td><td>{call.run}</td><td>{_esc(call.arm)}</td>"
            f"<td class=\"{css}\">{'pass' if call.passed else 'fail'}</td>"
            f"<td>{_esc(sum(call.decisions.values()))}</td>"
            f"<td><a href=\"#{_esc(_anchor(call))}\">timeline</a></td></tr>")


def _call_html(call: CallMetrics) -> str:
    css = "pass" if call.passed else "fail"
    summary = (f"{_esc(call.scenario)} · run {call.run} · "
               f"[{_esc(', '.join(call.controls) or 'no controls')}] · "
               f"<span class=\"{css}\">{'pass' if call.passed else 'fail'}</span>")
    decisions = ", ".join(f"{k}×{v}" for k, v in sorted(call.decisions.items())) or "no decisions"
    body = f"<p class=\"meta\">{_esc(call.domain)} · {_esc(decisions)}</p>"
    if call.error:
        body += f"<p class=\"fail\">simulation error: {_esc(call.error)}</p>"
    trace = Path(call.trace) if call.trace else None
    if trace is not None and trace.is_file():
        try:
            timeline = Timeline.load(trace)
        except ValueError as exc:
            body += f"<p class=\"fail\">unreadable trace {_esc(trace)}: {_esc(exc)}</p>"
        else:
            body += call_header_html(timeline) + timeline_html(timeline, anchor_prefix=_anchor(call) + "-")
    else:
        body += "<p class=\"meta\">no trace recorded</p>"
    return f"<details id=\"{_esc(_anchor(call))}\"><summary>{summary}</summary>{body}</details>"


def render_report(evaluation: EvalRun) -> str:
    """The report as one HTML document.

    A call shared by several toggles (the full-preset arm) is drawn once and linked from each.
    """
    parts = [
        "<h1>pipecat-harness evaluation</h1>",
        f"<p class=\"meta\">{len(evaluation.scenarios)} scenarios · {evaluation.runs} run(s) per arm · "
        f"seed {evaluation.seed} · {evaluation.calls_simulated} calls simulated in {evaluation.wall_secs:.0f} s · "
        f"rules: {_esc(evaluation.rules_source)}</p>",
        *(f"<p class=\"meta\">{_esc(line)}</p>" for line in run_lines(evaluation)),
    ]
    unique: dict[str, CallMetrics] = {}
    for result in evaluation.results:
        parts.append(f"<h2 id=\"{_esc(result.control)}\">{_esc(result.control)}: on vs off</h2>")
        parts.append(_summary_html(result, len(evaluation.scenarios)))
        calls = sorted(result.calls, key=lambda c: (c.scenario, c.run, c.arm != "on"))
        parts.append("<details><summary>calls of this comparison</summary><table><thead><tr><th>scenario</th>"
                     "<th>run</th><th>arm</th><th>outcome</th><th>decisions</th><th></th></tr></thead><tbody>"
                     + "".join(_call_link(c) for c in calls) + "</tbody></table></details>")
        for call in calls:
            unique.setdefault(_anchor(call), call)
    parts.append("<h2 id=\"calls\">call timelines</h2>")
    parts.extend(_call_html(call) for _, call in sorted(unique.items()))
    return html_page("pipecat-harness evaluation", "".join(parts))


def write_report(evaluation: EvalRun, path: str | Path) -> Path:
    """Write the report and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(evaluation), encoding="utf-8")
    return path
