"""HTML of the console's pages, rendered on the server from the Jinja2 templates in ``templates/`` (values escaped).

No script and no style attribute: the stylesheet sits in one ``<style>`` element and the chart is inline SVG. Every form
that changes something carries the viewer's session CSRF token (``csrf``; none for a bearer-token viewer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from pipecat_harness.grader.alerts import call_links
from pipecat_harness.grader.audit import REVIEW_STATUS, AuditRow, ReviewEvent
from pipecat_harness.grader.console.queries import STATUSES, QueueFilter, RatePoint
from pipecat_harness.grader.verdict import CATEGORIES
from pipecat_harness.trace.handoff import SECTIONS, Handoff, Link

__all__ = ["call_page", "queue_page", "tenant_page"]

_HERE = Path(__file__).resolve().parent
_SEVERITIES = ("critical", "warning", "info")
_STYLESHEET = Markup((_HERE / "static" / "console.css").read_text(encoding="utf-8"))  # the package's own file


_RECORD_KINDS = {"caller_turn": "Caller turn", "tool_result": "Tool result", "ledger_event": "Ledger event"}
_ENV = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True)
_ENV.filters.update(when=lambda at: datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "",
                    urlpart=lambda value: quote(value, safe=""),
                    refs=lambda row: ", ".join(r.strip() for r in (row.constraint_ref or "none").split(",")),
                    call_url=lambda row: call_links(row.tenant, row.call_id, row.turn_id)["operator_console"])
_ENV.globals.update(stylesheet=_STYLESHEET, review_actions=REVIEW_STATUS, severities=_SEVERITIES, categories=CATEGORIES,
                    statuses=STATUSES, record_kinds=_RECORD_KINDS)


def _render(template: str, **values: Any) -> str:
    return _ENV.get_template(template).render(**values)


def queue_page(rows: Sequence[AuditRow], filters: QueueFilter, tenants: Sequence[str],
               history: dict[int, list[ReviewEvent]], *, title: str = "Flagged turns", csrf: str = "") -> str:
    """The queue: flagged claims newest first, filterable, each with its actions and a link to its call."""
    back = "/" + (f"?{urlencode(filters.params())}" if filters.params() else "")
    return _render("queue.html", title=title, rows=rows, filters=filters, tenants=tenants, history=history, back=back,
                   csrf=csrf)


def _handoff(handoff: Handoff | str | None) -> dict[str, Any] | None:
    """The handoff section's lines, each with its links, and the records they link to (every one listed once)."""
    if handoff is None:
        return None
    if isinstance(handoff, str) or not handoff.lines:
        return {"problem": handoff if isinstance(handoff, str) else "Nothing verified to hand off."}
    records: dict[str, Link] = {}
    lines = []
    for section in SECTIONS:
        for line in [line for line in handoff.lines if line.section == section]:
            anchors = ["rec-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{k.kind}-{k.ref}").strip("-") for k in line.links]
            links = list(zip(anchors, line.links, strict=True))
            for anchor, link in links:
                records.setdefault(anchor, link)
            lines.append((section, line, links))
    return {"lines": lines, "records": sorted(records.items(), key=lambda item: item[1].t)}


def call_page(tenant: str, call_id: str, rows: Sequence[AuditRow], history: dict[int, list[ReviewEvent]], *,
              has_audio: bool, handoff: Handoff | str | None = None, csrf: str = "") -> str:
    """One call: its verified handoff summary (or why its trace could not be read), then the transcript as graded."""
    links = call_links(tenant, call_id)
    turns = []
    for number in sorted({r.turn_id for r in rows}):
        claims = [r for r in rows if r.turn_id == number]
        flagged = [r for r in claims if r.flagged or r.verdict == "not_graded"]
        worst = next((s for s in _SEVERITIES if any(r.severity == s for r in flagged)), "")
        classes = f"turn flagged {worst}" if flagged else "turn"
        turns.append({"number": number, "row": claims[0], "flagged": flagged, "classes": classes})
    versions = sorted({r.constraints_version for r in rows})
    return _render("call.html", title=f"Call {call_id}", tenant=tenant, links=links, versions=versions,
                   has_audio=has_audio, turns=turns, history=history, handoff=_handoff(handoff), csrf=csrf)


def _chart(points: Sequence[RatePoint]) -> dict[str, Any]:
    width, height, pad = 640, 220, 36
    top = max([p.flag_rate for p in points] + [p.out_of_scope_rate for p in points] + [0.05])
    step = (width - 2 * pad) / max(1, len(points) - 1)

    def coords(values: list[float]) -> str:
        return " ".join(f"{pad + i * step:.1f},{height - pad - v / top * (height - 2 * pad):.1f}"
                        for i, v in enumerate(values))

    every = max(1, len(points) // 6)
    ticks = [(f"{pad + i * step:.1f}", p.day.strftime("%m-%d")) for i, p in enumerate(points) if i % every == 0]
    flags, oos = coords([p.flag_rate for p in points]), coords([p.out_of_scope_rate for p in points])
    return dict(width=width, height=height, pad=pad, top=top, ticks=ticks, flag_points=flags, oos_points=oos)


def tenant_page(tenant: str, points: Sequence[RatePoint], *, csrf: str = "") -> str:
    """A tenant's flag rate and out_of_scope rate per day, as a chart and a table."""
    queue = f"/?{urlencode({'tenant': tenant})}"
    return _render("tenant.html", title=f"Tenant {tenant}", points=points, chart=_chart(points), queue=queue, csrf=csrf)
