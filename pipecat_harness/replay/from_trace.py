"""Turn a recorded call into a scenario: the caller side exactly, the model side as recorded decisions.

Each stretch of speech VAD heard (its stop less the stop window) is a ``say`` segment of the recogniser's finals, or
``silent``; gaps inside a turn are ``pause`` segments; a turn starts ``after`` what it followed (``bot_started``: over
the bot). Each model request is a decision firing once, keyed on what it answered (other input: the fallback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from pipecat_harness.replay.decision_point import decision_points
from pipecat_harness.sim.caller import VAD_STOP_SECS
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.trace.timeline import Timeline

__all__ = ["scenario_from_trace"]

# Pipecat composes its async-tool guidance onto the prompt itself; a scenario's prompt must not carry it twice.
_PIPECAT_ADDITIONS = ("\n\nASYNC TOOLS:", "\n\nASYNC TOOL")
#: What a source scenario gives up: the trace brings the caller and model sides (its business side is kept).
_REPLACED_BY_THE_TRACE = {"name", "description", "model", "caller", "caller_goal", "source"}
_KEPT_MODEL_FIELDS = {"system", "fallback", "summary", "first_token_secs", "token_secs"}
_Spans = list[tuple[float, float]]


@dataclass
class _Stretch:
    start: float
    stop: float | None = None
    stop_secs: float = VAD_STOP_SECS
    finals: list[str] = field(default_factory=list)
    final_at: float | None = None

    @property
    def end(self) -> float:
        """When the speech itself ended (VAD reports it a stop window later)."""
        stop = self.stop if self.stop is not None else self.start
        return max(self.start, stop - self.stop_secs)


def _stretches(timeline: Timeline) -> list[_Stretch]:
    stretches: list[_Stretch] = []
    for event in timeline.of("speech_started", "speech_stopped", "asr_final", lane="caller"):
        if event.kind == "speech_started":
            stretches.append(_Stretch(event.t))
        elif event.kind == "speech_stopped" and stretches and stretches[-1].stop is None:
            stretches[-1].stop = event.t
            stretches[-1].stop_secs = float(event.data.get("stop_secs") or VAD_STOP_SECS)
        elif event.kind == "asr_final" and stretches:
            text = str(event.data.get("text", "")).strip()
            if text:
                stretches[-1].finals.append(text)
                stretches[-1].final_at = event.t
    return [s for s in stretches if s.stop is not None]


def _turn_starts(timeline: Timeline, stretches: list[_Stretch], bot: _Spans) -> list[float]:
    """The trace's ``caller_turn`` events, or else a new turn whenever the bot spoke since the previous stretch."""
    named = [e.t for e in timeline.of("caller_turn", lane="caller")]
    if named:
        return named
    starts: list[float] = []
    previous_end = -1.0
    for stretch in stretches:
        spoke_since = any(previous_end < b_start <= stretch.start for b_start, _ in bot)
        over_bot = any(b_start <= stretch.start < b_stop for b_start, b_stop in bot)
        if not starts or spoke_since or over_bot:
            starts.append(stretch.start)
        previous_end = stretch.end
    return starts


def _trigger(start: float, previous_turn: float, bot: _Spans, barge_ins: list[float]) -> dict[str, Any]:
    # The bot stops in the very instant the caller's speech interrupts it: the interruption tells the two apart.
    cut = any(abs(t - start) < 0.05 for t in barge_ins)
    speaking = [b for b in bot if b[0] <= start + 1e-6 and (start < b[1] or (cut and start <= b[1] + 1e-6))]
    if speaking:
        return {"after": "bot_started", "delay": round(start - speaking[-1][0], 4)}
    stops = [b_stop for b_start, b_stop in bot if b_start >= previous_turn - 1e-6 and b_stop <= start + 1e-6]
    if stops:
        return {"after": "bot", "delay": round(start - stops[-1], 4)}
    return {"after": "start", "delay": round(start, 4)}


def _caller_turns(timeline: Timeline) -> tuple[list[dict[str, Any]], float | None]:
    stretches = _stretches(timeline)
    bot = timeline.spans("bot_started_speaking", "bot_stopped_speaking", lane="bot", open_until=float("inf"))
    starts = _turn_starts(timeline, stretches, bot)
    barge_ins = [e.t for e in timeline.of("interruption", lane="bot") if e.data.get("bot_speaking")]
    turns: list[dict[str, Any]] = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else float("inf")
        members = [s for s in stretches if start - 1e-3 <= s.start < end - 1e-3]
        if not members:
            continue
        speech: list[dict[str, Any]] = []
        for previous, stretch in zip([None, *members], members, strict=False):
            if previous is not None:
                speech.append({"pause": round(max(0.0, stretch.start - previous.end), 4)})
            secs = round(max(stretch.end - stretch.start, 0.01), 4)
            speech.append({"say": " ".join(stretch.finals), "secs": secs} if stretch.finals else {"silent": secs})
        trigger = _trigger(members[0].start, starts[index - 1] if index else -1.0, bot, barge_ins)
        turns.append({**trigger, "wait": max(10.0, round(trigger["delay"] + 10.0, 1)), "speech": speech})
    latencies = [s.final_at - s.end for s in stretches if s.final_at is not None and s.final_at >= s.end]
    return turns, round(median(latencies), 4) if latencies else None


def _model_decisions(timeline: Timeline) -> list[dict[str, Any]]:
    decisions: list[dict[str, Any]] = []
    for point in decision_points(timeline):
        action = point.recorded
        if not action.text and not action.tool_calls:
            continue  # interrupted before its first token: nothing was decided
        tools, user = point.after_tool_results, point.newest_user_text
        when = {"tool": tools[-1]} if tools else {"user": f"^{re.escape(user.strip())}$"} if user else {"start": True}
        said = {"say": action.text} if action.text else {}
        calls = [{"name": c.name, "args": c.arguments} for c in action.tool_calls]
        decisions.append({"when": when, **said, **({"tool_calls": calls} if calls else {})})
    return decisions


def _prompt(timeline: Timeline) -> str | None:
    system = next((e.data["system"] for e in timeline.of("model_input") if isinstance(e.data.get("system"), str)), "")
    for marker in _PIPECAT_ADDITIONS:
        system = system.split(marker, 1)[0]
    return system.strip() or None


def scenario_from_trace(timeline: Timeline, *, name: str | None = None, source: Scenario | None = None,
                        live_model: bool = False) -> dict[str, Any]:
    """The scenario a recorded call becomes, as the mapping a scenario file holds.

    ``name`` defaults to the trace's scenario name or call id with ``_replayed``. ``source``, the scenario the call was
    simulated from, gives the business, voice and expectations (without it: the retail demo, expecting only that the
    caller finishes). ``live_model`` leaves the recorded decisions out: a real model will answer.
    """
    header = timeline.call
    base = name or f"{header.get('scenario') or header.get('call_id') or 'recorded_call'}_replayed"
    turns, final_secs = _caller_turns(timeline)
    description = f"Recorded call {header.get('call_id', '')} replayed from its trace."
    raw: dict[str, Any] = {"name": re.sub(r"[^A-Za-z0-9_.-]", "_", base), "description": description}
    model: dict[str, Any] = {}
    if source is not None:
        raw.update(source.model_dump(mode="json", exclude_defaults=True, exclude=_REPLACED_BY_THE_TRACE))
        # The recorded text is already the recogniser's writing.
        raw["caller_voice"] = {**(raw.get("caller_voice") or {}), "asr_format": "plain"}
        model = source.model.model_dump(mode="json", include=_KEPT_MODEL_FIELDS)
    else:
        if final_secs is not None:
            raw["caller_voice"] = {"asr_final_secs": min(5.0, final_secs)}
        if (prompt := _prompt(timeline)) is not None:
            model["system"] = prompt
    if not live_model:
        model["decisions"] = _model_decisions(timeline)
    return {**raw, "model": model, "caller": turns}
