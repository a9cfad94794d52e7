"""A call drawn as swimlanes on one time axis (inline SVG: no scripts, no external assets)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipecat_harness.trace.render import render, template_text
from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = ["SWIMLANES", "SWIMLANE_CSS", "history_panel_html", "swimlanes_html"]

#: The lanes, top to bottom.
SWIMLANES: tuple[str, ...] = ("caller speech", "recognised text", "held turns", "model runs", "tool calls",
                              "bot audio played", "history kept / generated")

SWIMLANE_CSS = template_text("pipecat_harness.trace", "swimlanes.css")

_LABEL_W = 170.0
_WIDTH = 1300.0
_ROW_H = 30.0
_AXIS_H = 24.0


@dataclass(frozen=True)
class _Mark:
    lane: str
    start: float
    end: float
    css: str
    label: str
    tooltip: str
    anchor: int  # index of the event in the timeline (its table row)


def _history_evidence(event: TraceEvent) -> dict[str, Any] | None:
    evidence = event.data.get("evidence")
    return evidence if event.kind == "decision" and isinstance(evidence, dict) and "retained_text" in evidence else None


def _hold(event: TraceEvent, *actions: str) -> bool:
    data = event.data
    return event.kind == "decision" and data.get("control") == "identifier_hold" and data.get("action") in actions


def _answers(tool_call_id: Any, event: TraceEvent) -> bool:
    return event.data.get("tool_call_id") == tool_call_id


def _tool_css(result: TraceEvent | None) -> tuple[str, str]:
    if result is None:
        return "tool-error", "no result"
    if result.data.get("error"):
        return "tool-error", f"error: {result.data['error']}"
    payload = result.data.get("result")
    status = payload.get("status") if isinstance(payload, dict) else None
    if status in {"not_executed", "blocked", "outcome_unknown", "rejected"}:
        return "tool-skipped", str(status)
    return "tool-ok", str(status or "ok")


def _marks(timeline: Timeline) -> list[_Mark]:
    events = list(timeline)
    index = {id(e): i for i, e in enumerate(events)}
    end_of_call = max((e.t for e in events), default=0.0)
    marks: list[_Mark] = []

    def later(start: int, *kinds: str, where: Callable[[TraceEvent], bool] = lambda _: True) -> TraceEvent | None:
        return next((e for e in events[start + 1 :] if e.kind in kinds and where(e)), None)

    for i, event in enumerate(events):
        kind, d = event.kind, event.data
        if kind == "speech_started":
            stop, heard = later(i, "speech_stopped"), later(i, "asr_final")
            tooltip = "caller speaking" + (f": {heard.data.get('text', '')}" if heard else "")
            anchor = index[id(heard)] if heard else i  # the table omits speech frames: link to what was recognised
            end = stop.t if stop else end_of_call
            marks.append(_Mark("caller speech", event.t, end, "speech", "", tooltip, anchor))
        elif kind == "asr_final":
            text = str(d.get("text", ""))
            marks.append(_Mark("recognised text", event.t, event.t, "asr", text, f"recognised: {text}", i))
        elif kind == "submitted":
            text = str(d.get("text", ""))
            marks.append(_Mark("recognised text", event.t, event.t, "model", "", f"submitted to the model: {text}", i))
        elif _hold(event, "held"):
            release = later(i, "decision", where=lambda e: _hold(e, "merged", "released", "resumed"))
            evidence = d.get("evidence") or {}
            then = f"; then {release.data.get('action')}" if release else ""
            tooltip = f'identifier hold: held "{evidence.get("text", "")}"{then}'
            end = release.t if release else end_of_call
            marks.append(_Mark("held turns", event.t, end, "hold", f"held: {evidence.get('rule', '')}", tooltip, i))
        elif kind == "model_input":
            done = later(i, "generated", "tool_request", "model_input")
            end = done.t if done is not None and done.kind != "model_input" else event.t
            reply = done.data.get("text", "") if done is not None and done.kind == "generated" else ""
            generated = f"; generated: {reply}" if reply else ""
            tooltip = f"model run on {len(d.get('messages') or [])} messages{generated}"
            marks.append(_Mark("model runs", event.t, end, "model", "", tooltip, i))
        elif kind == "tool_request":
            result = later(i, "tool_result", where=functools.partial(_answers, d.get("tool_call_id")))
            css, status = _tool_css(result)
            arguments = json.dumps(d.get("arguments"), ensure_ascii=False)
            returned = json.dumps(result.data.get("result"), ensure_ascii=False, default=str) if result else ""
            tooltip = f"{d.get('name')}({arguments}) -> {status} {returned}"
            end = result.t if result else end_of_call
            marks.append(_Mark("tool calls", event.t, end, css, f"{d.get('name')}: {status}", tooltip, i))
        elif kind == "bot_started_speaking":
            stop, spoken = later(i, "bot_stopped_speaking"), later(i, "generated")
            end = stop.t if stop else end_of_call
            cut = any(e.kind == "interruption" and e.data.get("bot_speaking") and event.t <= e.t <= end for e in events)
            text = str(spoken.data.get("text", "")) if spoken is not None and spoken.t <= end else ""
            said = f": {text}" if text else ""
            tooltip = f"{'interrupted after' if cut else 'played'} {end - event.t:.2f} s{said}"
            marks.append(_Mark("bot audio played", event.t, end, "audio-cut" if cut else "audio", text, tooltip, i))
        elif (evidence := _history_evidence(event)) is not None:
            played = float(evidence.get("played_secs") or 0.0)
            audio = float(evidence.get("audio_secs") or played)
            start, action = event.t - played, str(d.get("action"))
            said = f'generated "{evidence.get("generated_text", "")}"; heard "{evidence.get("heard_text", "")}"'
            tooltip = f'history {action}: {said}; kept "{evidence.get("retained_text", "")}"'
            label = (f"{action}: kept {evidence.get('chars_kept', '?')} chars, "
                     f"removed {evidence.get('chars_removed', '?')}")
            kept_css = "kept-unheard" if action == "retained" else "kept"
            marks.append(_Mark("history kept / generated", start, start + audio, "generated", "", tooltip, i))
            marks.append(_Mark("history kept / generated", start, event.t, kept_css, label, tooltip, i))
    return marks


def swimlanes_html(timeline: Timeline, *, anchor_prefix: str = "") -> str:
    """The call as an inline SVG of swimlanes on one time axis, with a legend; marks link ``anchor_prefix`` rows."""
    marks = _marks(timeline)
    duration = max([e.t for e in timeline] + [m.end for m in marks] + [1.0])
    scale = (_WIDTH - _LABEL_W - 10) / duration

    def x(t: float) -> float:
        return _LABEL_W + t * scale

    step = next(s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600) if duration / s <= 14)
    ticks = [{"x": x(n * step), "label": f"{float(n * step):g}"} for n in range(int(duration // step) + 1)]
    starts: dict[str, list[float]] = {}
    for mark in marks:
        if mark.label:  # unlabelled marks (submitted text) may sit under a neighbour's label
            starts.setdefault(mark.lane, []).append(x(mark.start))
    bars = []
    for mark in marks:
        x0, width = x(mark.start), max((mark.end - mark.start) * scale, 3.0)
        y = _AXIS_H + SWIMLANES.index(mark.lane) * _ROW_H + 5
        bars.append({"mark": mark, "x": x0, "y": y, "width": width, **_label(mark, x0, width, starts)})
    cuts = [(e.t, i, x(e.t)) for i, e in enumerate(timeline) if e.kind == "interruption" and e.data.get("bot_speaking")]
    return render("pipecat_harness.trace", "swimlanes.html", width=_WIDTH, height=_AXIS_H + _ROW_H * len(SWIMLANES) + 6,
                  row_height=_ROW_H, axis_height=_AXIS_H, lanes=SWIMLANES, ticks=ticks, bars=bars,
                  anchor_prefix=anchor_prefix, interruptions=cuts)


def _label(mark: _Mark, x0: float, width: float, starts: dict[str, list[float]]) -> dict[str, Any]:
    """Where a mark's label goes: inside a wide mark, right of a short one up to the lane's next mark, or nowhere."""
    outside = width < 40
    if outside:
        following = [s for s in starts.get(mark.lane, []) if s > x0 + width + 1]
        room = min([*following, _WIDTH - 4]) - (x0 + width) - 6
    else:
        room = width - 4
    chars = int(room / 5.6)
    if not mark.label or chars < 4:
        return {"text": ""}
    return {"text": mark.label if len(mark.label) <= chars else mark.label[: chars - 1] + "…",
            "text_css": "dark-text" if outside or mark.css == "generated" else "bar-text",
            "text_x": x0 + width + 3 if outside else x0 + 3}


def history_panel_html(timeline: Timeline) -> str:
    """Each interrupted reply's generated, heard and kept text side by side (empty when there is none)."""
    rows = [(event, evidence) for event in timeline
            if (evidence := _history_evidence(event)) is not None and event.data.get("action") != "played_in_full"]
    return render("pipecat_harness.trace", "history_panel.html", rows=rows) if rows else ""
