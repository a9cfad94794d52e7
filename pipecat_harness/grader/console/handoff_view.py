"""The verified handoff summary on a call's console page.

Each statement links to the records that support it (caller turn, tool result, ledger event); the records are listed
under the summary with their excerpts, so every link lands on the record it names, on the same page, without JavaScript.
Every value is escaped.
"""

from __future__ import annotations

import re
from html import escape

from pipecat_harness.business.handoff import SECTIONS, Handoff, Link

__all__ = ["handoff_section"]

_KIND_NAMES = {"caller_turn": "Caller turn", "tool_result": "Tool result", "ledger_event": "Ledger event"}


def _anchor(link: Link) -> str:
    return "rec-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{link.kind}-{link.ref}").strip("-")


def handoff_section(handoff: Handoff | None, problem: str = "") -> str:
    """The summary and its records, or a one-line reason why there is none.

    Args:
        handoff: The call's summary (``None``: no trace for the call).
        problem: Why the trace could not be read, if it could not.
    """
    if problem:
        return ("<section id='handoff'><h2>Handoff summary</h2>"
                f"<p class='handoff-missing'>{escape(problem)}</p></section>")
    if handoff is None:
        return ""
    if not handoff.lines:
        return ("<section id='handoff'><h2>Handoff summary</h2>"
                "<p class='handoff-missing'>Nothing verified to hand off.</p></section>")
    records: dict[str, Link] = {}
    rows = []
    for section in SECTIONS:
        for line in handoff.lines:
            if line.section != section:
                continue
            links = []
            for link in line.links:
                anchor = _anchor(link)
                records.setdefault(anchor, link)
                links.append(f"<a class='handoff-link {link.kind}' href='#{anchor}' "
                             f"title='{escape(link.quote)}'>{escape(link.label())}</a>")
            rows.append(
                f"<tr class='handoff-line' data-section='{escape(section)}'><th>{escape(section)}</th>"
                f"<td class='statement'>{escape(line.text)}</td><td class='links'>{' '.join(links)}</td></tr>"
            )
    items = "".join(
        f"<li class='record {link.kind}' id='{anchor}'><span class='record-kind'>{_KIND_NAMES[link.kind]}</span> "
        f"<span class='record-ref'>{escape(link.ref)}</span> at {link.t:.1f}s: <q>{escape(link.quote)}</q></li>"
        for anchor, link in sorted(records.items(), key=lambda item: item[1].t)
    )
    return (
        "<section id='handoff'><h2>Handoff summary</h2>"
        f"<table class='handoff'>{''.join(rows)}</table>"
        f"<h3>Supporting records</h3><ol id='handoff-records'>{items}</ol></section>"
    )
