"""Render a call timeline readably in the terminal."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = ["FRAME_EVENT_KINDS", "describe_event", "is_routine", "render_timeline", "short_timeline"]

_LANE_STYLES = dict(caller="cyan", model="magenta", tool="yellow", bot="green", control="bold red", call="dim")
#: Per-frame events the short views leave out (the JSONL keeps them).
FRAME_EVENT_KINDS = frozenset(["asr_interim", "played_text", "user_turn_started", "user_turn_stopped",
                               "decision_outcome", "speech_started", "speech_stopped"])
_DETAIL_KINDS = FRAME_EVENT_KINDS | {"model_input", "turn_playback"}


def _clip(text: str, width: int | None) -> str:
    text = " ".join(str(text).split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def is_routine(event: TraceEvent) -> bool:
    """Whether an event only confirms that nothing happened (a reply played in full, a no-op interruption)."""
    if event.kind == "decision" and event.data.get("control") == "history":
        return event.data.get("action") == "played_in_full"
    return event.kind == "interruption" and event.data.get("bot_speaking") is False


def describe_event(event: TraceEvent, width: int | None = 110) -> str:
    """One-line description of an event, clipped to ``width`` characters (``None``: nothing cut)."""
    d, kind = event.data, event.kind
    if kind == "assistant_committed":  # before any history correction, which is its own decision
        return _clip(f'Pipecat committed "{d.get("text", "")}"', width)
    if kind in {"asr_final", "asr_interim", "submitted", "generated", "played_text"}:
        return _clip(f'"{d.get("text", "")}"', width)
    if kind == "model_input":
        messages = d.get("messages") or []
        total, keep = int(d.get("total", len(messages))), int(d.get("keep") or 0)
        size = f"{total} messages" + (f" ({total - keep} new)" if keep else "")
        if not messages:
            return _clip(f"{size}; none new", width)
        last = messages[-1] if isinstance(messages[-1], dict) else {"content": str(messages[-1])}
        content = last.get("content") or json.dumps(last.get("tool_calls") or "")
        return _clip(f"{size}; last {last.get('role', '?')}: {content}", width)
    if kind == "tool_request":
        arguments = json.dumps(d.get("arguments"), ensure_ascii=False)
        return _clip(f"{d.get('name')}({arguments}) [{d.get('tool_call_id')}]", width)
    if kind == "tool_result":
        error = f" error={d['error']}" if d.get("error") else ""
        return _clip(f"{d.get('name')} -> {json.dumps(d.get('result'), ensure_ascii=False)}{error}", width)
    if kind == "decision" and "retained_text" in (d.get("evidence") or {}):
        # The history decision is the one a reader needs whole: what was generated, heard and kept.
        ev, head = d["evidence"], f"{d.get('control')}: {d.get('action')} (turn {d.get('turn_id')})"
        said = f'generated "{ev.get("generated_text", "")}"; heard "{ev.get("heard_text", "")}"'
        return f'{head}; {said}; kept "{ev.get("retained_text", "")}"'
    if kind in {"decision", "decision_outcome"}:
        evidence = json.dumps(d.get("evidence") or {}, ensure_ascii=False, default=str)
        outcome = f" outcome={json.dumps(d['outcome'], default=str)}" if d.get("outcome") else ""
        return _clip(f"{d.get('control')}: {d.get('action')} (turn {d.get('turn_id')}) {evidence}{outcome}", width)
    if kind == "bot_stopped_speaking":
        return f"played {d.get('played_secs', 0):.2f} s"
    if kind == "call_result":
        failed = [c["name"] + ": " + c["detail"] for c in d.get("checks", []) if not c.get("ok")]
        verdict = f"outcome={d.get('outcome')} expected={d.get('expected')}"
        return _clip(verdict + ("; " + "; ".join(failed) if failed else ""), width)
    if kind == "call_started":
        return _clip(f"call {d.get('call_id')} controls={d.get('controls')} {d.get('description', '')}", width)
    if kind == "turn_playback":
        heard = f"heard {d.get('heard_words')}, retained {d.get('retained_words')}"
        return f"generated {d.get('generated_words')} words, {heard}"
    rest = {k: v for k, v in d.items() if k != "call_id"}
    return _clip(json.dumps(rest, ensure_ascii=False, default=str) if rest else "", width)


def short_timeline(timeline: Timeline) -> list[TraceEvent]:
    """The events worth a glance: what was said, submitted, decided, executed and kept (no routine confirmations)."""
    return [e for e in timeline if e.kind not in _DETAIL_KINDS and not is_routine(e)]


def render_timeline(timeline: Timeline, *, console: Console | None = None, full: bool = False,
                    lanes: set[str] | None = None) -> None:
    """Print a timeline as a table (time, lane, event, detail) on ``console`` (default: stdout).

    ``full`` includes per-frame detail (interims, played words, model inputs) and cuts no text; ``lanes`` keeps only
    the events of those lanes.
    """
    console = console or Console()
    events = [e for e in (timeline if full else short_timeline(timeline)) if not lanes or e.lane in lanes]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("t (s)", "lane", "event"):
        table.add_column(column, justify="right" if column == "t (s)" else "left", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for event in events:
        style: Any = _LANE_STYLES.get(event.lane, "")
        detail = describe_event(event, width=None if full else 110)
        table.add_row(f"{event.t:7.2f}", Text(event.lane, style=style), event.kind, Text(detail))
    console.print(table)
