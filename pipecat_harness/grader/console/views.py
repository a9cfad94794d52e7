"""HTML of the console's pages, rendered on the server.

No script and no style attribute: the pages work without JavaScript, carry the
stylesheet (``static/console.css``) in one ``<style>`` element, which the
console's Content-Security-Policy allows, and draw the tenant chart as inline
SVG. Every value from the audit store is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from urllib.parse import quote, urlencode

from pipecat_harness.grader.alerts import call_links
from pipecat_harness.grader.audit import REVIEW_STATUS, AuditRow, ReviewEvent
from pipecat_harness.grader.console.queries import STATUSES, QueueFilter, RatePoint
from pipecat_harness.grader.verdict import CATEGORIES

__all__ = ["call_page", "queue_page", "tenant_page"]

_SEVERITIES = ("critical", "warning", "info")
_STYLESHEET = (Path(__file__).resolve().parent / "static" / "console.css").read_text(encoding="utf-8")


def _when(stamp: float | None) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if stamp else ""


def _layout(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_STYLESHEET}</style></head><body>"
        "<nav><a href='/'>Queue</a></nav>"
        f"<h1>{escape(title)}</h1>{body}</body></html>"
    )


def _call_url(row: AuditRow) -> str:
    return call_links(row.tenant, row.call_id, row.turn_id)["operator_console"]


def _select(name: str, label: str, options: Sequence[str], chosen: str | None) -> str:
    items = "".join(
        f"<option value='{escape(o)}'{' selected' if o == chosen else ''}>{escape(o)}</option>" for o in options
    )
    return f"<label>{label} <select name='{name}'><option value=''>any</option>{items}</select></label>"


def _filters(filters: QueueFilter, tenants: Sequence[str]) -> str:
    since = filters.since.isoformat() if filters.since else ""
    until = filters.until.isoformat() if filters.until else ""
    return (
        "<form id='filters' method='get' action='/'>"
        + _select("tenant", "Tenant", tenants, filters.tenant)
        + _select("severity", "Severity", _SEVERITIES, filters.severity)
        + _select("category", "Category", CATEGORIES, filters.category)
        + _select("status", "Status", STATUSES, filters.status)
        + f"<label>From <input type='date' name='since' value='{since}'></label>"
        + f"<label>To <input type='date' name='until' value='{until}'></label>"
        + "<button type='submit' id='apply-filters'>Filter</button></form>"
    )


def _history(events: Sequence[ReviewEvent]) -> str:
    if not events:
        return "<ol class='history'></ol>"
    items = "".join(
        f"<li class='review {escape(e.status)}'><span class='review-action'>{escape(e.action)}</span> by "
        f"<span class='review-actor'>{escape(e.actor or 'unknown')}</span> at <time>{_when(e.at)}</time>"
        + (f": <q class='review-note'>{escape(e.note)}</q>" if e.note else "")
        + "</li>"
        for e in events
    )
    return f"<ol class='history'>{items}</ol>"


def _actions(row: AuditRow, back: str) -> str:
    forms = "".join(
        f"<button type='submit' formaction='/rows/{row.id}/{action}' class='action-{action}'>"
        f"{action.capitalize()}</button>"
        for action in REVIEW_STATUS
    )
    return (
        f"<form class='actions' method='post' action='/rows/{row.id}/acknowledge'>"
        f"<input type='hidden' name='next' value='{escape(back)}'>"
        "<label>Note <input type='text' name='note' class='note' maxlength='2000'></label>"
        "<label>Who <input type='text' name='who' class='who' maxlength='128'></label>"
        f"{forms}</form>"
    )


def _verdict(row: AuditRow, history: Sequence[ReviewEvent], back: str) -> str:
    refs = ", ".join(r.strip() for r in (row.constraint_ref or "none").split(","))
    return (
        f"<div class='verdict {escape(row.severity)}' id='row-{row.id}' data-row-id='{row.id}' "
        f"data-status='{escape(row.review_status)}' data-verdict='{escape(row.verdict)}' "
        f"data-category='{escape(row.category)}'>"
        f"<p class='meta'>{escape(row.severity).upper()} · {escape(row.category)} · {escape(row.verdict)} · "
        f"confidence {row.confidence:.2f} · {escape(row.grader_model)}</p>"
        f"<p class='rationale'>{escape(row.rationale)}</p>"
        f"<p class='constraint'>Constraint: <code>{escape(refs)}</code> · list "
        f"<span class='list-version'>{escape(row.constraints_version)}</span></p>"
        f"<p>Status: <span class='status'>{escape(row.review_status)}</span></p>"
        f"{_actions(row, back)}{_history(history)}</div>"
    )


def queue_page(
    rows: Sequence[AuditRow],
    filters: QueueFilter,
    tenants: Sequence[str],
    history: dict[int, list[ReviewEvent]],
    *,
    title: str = "Flagged turns",
) -> str:
    """The queue: flagged claims newest first, filterable, each with its actions and a link to its call."""
    back = "/" + (f"?{urlencode(filters.params())}" if filters.params() else "")
    cards = []
    for row in rows:
        caller = f"<p class='caller'>Caller: “{escape(row.caller_utterance)}”</p>" if row.caller_utterance else ""
        cards.append(
            f"<article class='card {escape(row.severity)}' id='card-{row.id}' data-row-id='{row.id}' "
            f"data-status='{escape(row.review_status)}' data-category='{escape(row.category)}' "
            f"data-tenant='{escape(row.tenant)}' data-severity='{escape(row.severity)}'>"
            f"<p class='meta'>{escape(row.tenant)} · call <a class='call-link' href='{escape(_call_url(row))}'>"
            f"{escape(row.call_id)}</a> turn {row.turn_id} · {_when(row.created_at)}</p>"
            f"<p class='utterance'>Agent: “{escape(row.utterance)}”</p>{caller}"
            f"{_verdict(row, history.get(row.id or 0, []), back)}</article>"
        )
    listing = "".join(cards) or "<p id='empty'>No flagged turns.</p>"
    tenant_links = " ".join(f"<a class='tenant-link' href='/t/{quote(t, safe='')}'>{escape(t)}</a>" for t in tenants)
    body = (
        f"{_filters(filters, tenants)}<p class='tenants'>Tenants: {tenant_links}</p>"
        f"<p class='count'>{len(rows)} flagged</p><main id='cards'>{listing}</main>"
    )
    return _layout(title, body)


def call_page(
    tenant: str, call_id: str, rows: Sequence[AuditRow], history: dict[int, list[ReviewEvent]], *, has_audio: bool,
    handoff: str = "",
) -> str:
    """One call: its handoff summary (when its trace is known), then the transcript as graded, flags in place."""
    links = call_links(tenant, call_id)
    back = links["operator_console"]
    turns: dict[int, list[AuditRow]] = {}
    for row in rows:
        turns.setdefault(row.turn_id, []).append(row)
    parts = []
    for turn, claims in sorted(turns.items()):
        first = claims[0]
        flagged = [r for r in claims if r.flagged or r.verdict == "not_graded"]
        if first.caller_utterance:
            parts.append(f"<div class='line caller-line'><span class='who'>Caller</span> "
                         f"<span class='said'>{escape(first.caller_utterance)}</span></div>")
        worst = next((s for s in _SEVERITIES if any(r.severity == s for r in flagged)), "")
        classes = f"turn flagged {worst}" if flagged else "turn"
        verdicts = "".join(_verdict(r, history.get(r.id or 0, []), back) for r in flagged)
        parts.append(
            f"<article class='{classes}' id='turn_{turn:03d}' data-turn='{turn}'>"
            f"<div class='line agent-line'><span class='who'>Agent</span> "
            f"<span class='said'>{escape(first.utterance)}</span></div>{verdicts}</article>"
        )
    versions = sorted({r.constraints_version for r in rows})
    audio = (
        f"<audio id='recording' controls preload='none' src='{escape(links['audio'])}'></audio>"
        if has_audio else "<p id='no-recording'>No recording of this call.</p>"
    )
    body = (
        f"<p class='meta'>Tenant <a href='/t/{quote(tenant, safe='')}'>{escape(tenant)}</a> · "
        f"graded against constraint list <span class='list-versions'>{escape(', '.join(versions))}</span> · "
        f"<a href='{escape(links['transcript'])}'>transcript</a></p>{audio}{handoff}"
        f"<section id='transcript'>{''.join(parts) or '<p>No graded turns.</p>'}</section>"
    )
    return _layout(f"Call {call_id}", body)


def _chart(points: Sequence[RatePoint]) -> str:
    width, height, pad = 640, 220, 36
    top = max([p.flag_rate for p in points] + [p.out_of_scope_rate for p in points] + [0.05])
    step = (width - 2 * pad) / max(1, len(points) - 1)

    def line(values: list[float], css: str, color: str) -> str:
        coords = " ".join(
            f"{pad + i * step:.1f},{height - pad - v / top * (height - 2 * pad):.1f}" for i, v in enumerate(values)
        )
        return f"<polyline class='{css}' fill='none' stroke='{color}' stroke-width='3' points='{coords}'/>"

    ticks = "".join(
        f"<text x='{pad + i * step:.1f}' y='{height - 10}' font-size='10' text-anchor='middle'>"
        f"{p.day.strftime('%m-%d')}</text>"
        for i, p in enumerate(points) if i % max(1, len(points) // 6) == 0
    )
    return (
        f"<svg id='rate-chart' viewBox='0 0 {width} {height}' width='{width}' height='{height}' role='img' "
        "aria-label='flag rate and out_of_scope rate per day'>"
        f"<rect x='0' y='0' width='{width}' height='{height}' fill='#ffffff'/>"
        f"<line x1='{pad}' y1='{height - pad}' x2='{width - pad}' y2='{height - pad}' stroke='#888888'/>"
        f"<line x1='{pad}' y1='{pad}' x2='{pad}' y2='{height - pad}' stroke='#888888'/>"
        f"<text x='4' y='{pad}' font-size='10'>{top:.0%}</text><text x='4' y='{height - pad}' font-size='10'>0%</text>"
        + line([p.flag_rate for p in points], "flag-rate", "#c62828")
        + line([p.out_of_scope_rate for p in points], "out-of-scope-rate", "#1565c0")
        + ticks + "</svg>"
        "<p class='legend'><span class='key flag-key'>flag rate</span> "
        "<span class='key oos-key'>out_of_scope rate</span></p>"
    )


def tenant_page(tenant: str, points: Sequence[RatePoint]) -> str:
    """A tenant's flag rate and out_of_scope rate per day, as a chart and a table."""
    rows = "".join(
        f"<tr data-day='{p.day.isoformat()}'><td>{p.day.isoformat()}</td><td>{p.turns}</td>"
        f"<td class='flag-rate'>{p.flag_rate:.1%}</td><td class='oos-rate'>{p.out_of_scope_rate:.1%}</td></tr>"
        for p in points if p.turns
    )
    turns = sum(p.turns for p in points)
    flagged = sum(p.flagged for p in points)
    queue = f"/?{urlencode({'tenant': tenant})}"
    body = (
        f"<p class='meta'>{turns} graded turns, {flagged} flagged, in the last {len(points)} days · "
        f"<a href='{escape(queue)}'>queue of this tenant</a></p>{_chart(points)}"
        "<table id='rates'><thead><tr><th>day</th><th>turns</th><th>flag rate</th><th>out_of_scope rate</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )
    return _layout(f"Tenant {tenant}", body)
