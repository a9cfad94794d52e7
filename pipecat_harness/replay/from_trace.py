"""Turn a recorded call into a scenario: the caller side exactly, the model side as recorded decisions.

Caller side, from the ``caller`` and ``bot`` lanes: every stretch of speech VAD heard (its stop moved back by the stop
window) is a ``say`` segment with the recogniser's finals joined, or ``silent`` without a transcript; gaps inside a turn
are ``pause`` segments; a turn starts ``after: bot_started`` when the caller spoke over the bot, ``after: bot`` after
the bot's reply, ``after: start`` before the bot spoke. Turns are the trace's ``caller_turn`` events, or else a new turn
whenever the bot spoke since the previous stretch.

Model side: one decision per model request, firing once, keyed on what it answered (the start, the newest caller message
word for word, or a tool's results) and doing what the model did. Input the model never received on the line matches no
decision, and the scripted model says its fallback. ``live_model=True`` leaves the decisions out. The business side
comes from the source scenario when known, else the retail demo with no expectations beyond the caller finishing.
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


def _bot_intervals(timeline: Timeline) -> list[tuple[float, float]]:
    return timeline.spans("bot_started_speaking", "bot_stopped_speaking", lane="bot", open_until=float("inf"))


def _turn_starts(timeline: Timeline, stretches: list[_Stretch], bot: list[tuple[float, float]]) -> list[float]:
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


def _trigger(start: float, previous_turn: float, bot: list[tuple[float, float]],
             barge_ins: list[float]) -> dict[str, Any]:
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
    bot = _bot_intervals(timeline)
    starts = _turn_starts(timeline, stretches, bot)
    barge_ins = [e.t for e in timeline.of("interruption", lane="bot") if e.data.get("bot_speaking")]
    turns: list[dict[str, Any]] = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else float("inf")
        members = [s for s in stretches if start - 1e-3 <= s.start < end - 1e-3]
        if not members:
            continue
        speech: list[dict[str, Any]] = []
        previous: _Stretch | None = None
        for stretch in members:
            if previous is not None:
                speech.append({"pause": round(max(0.0, stretch.start - previous.end), 4)})
            secs = round(max(stretch.end - stretch.start, 0.01), 4)
            if stretch.finals:
                speech.append({"say": " ".join(stretch.finals), "secs": secs})
            else:
                speech.append({"silent": secs})
            previous = stretch
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
        tools = point.after_tool_results
        if tools:
            when: dict[str, Any] = {"tool": tools[-1]}
        elif point.newest_user_text:
            when = {"user": f"^{re.escape(point.newest_user_text.strip())}$"}
        else:
            when = {"start": True}
        decision: dict[str, Any] = {"when": when}
        if action.text:
            decision["say"] = action.text
        if action.tool_calls:
            decision["tool_calls"] = [{"name": c.name, "args": c.arguments} for c in action.tool_calls]
        decisions.append(decision)
    return decisions


def _prompt(timeline: Timeline) -> str | None:
    header = next((e for e in timeline.of("model_input") if isinstance(e.data.get("system"), str)), None)
    if header is None:
        return None
    system = str(header.data["system"])
    for marker in _PIPECAT_ADDITIONS:
        system = system.split(marker, 1)[0]
    return system.strip() or None


def scenario_from_trace(timeline: Timeline, *, name: str | None = None, source: Scenario | None = None,
                        live_model: bool = False) -> dict[str, Any]:
    """The scenario a recorded call becomes, as the mapping a scenario file holds.

    Args:
        timeline: The recorded call.
        name: The scenario's name (default: the trace's call id or scenario name, with ``_replayed``).
        source: The scenario the call was simulated from (its business, voice and expectations are kept).
        live_model: Leave the recorded decisions out (a real model will answer).

    Returns:
        A mapping :class:`~pipecat_harness.sim.scenario.Scenario` validates.
    """
    header = timeline.call
    base = name or f"{header.get('scenario') or header.get('call_id') or 'recorded_call'}_replayed"
    turns, final_secs = _caller_turns(timeline)
    raw: dict[str, Any] = {"name": re.sub(r"[^A-Za-z0-9_.-]", "_", base),
                           "description": f"Recorded call {header.get('call_id', '')} replayed from its trace."}
    if source is not None:
        kept = source.model_dump(mode="json", exclude_defaults=True,
                                 include={"domain", "control", "expect_without_control", "tags", "database",
                                          "own_tools", "tts", "caller_voice", "faults", "expect", "tools",
                                          "harness", "max_call_secs"})
        raw.update(kept)
        voice = dict(raw.get("caller_voice") or {})
        voice["asr_format"] = "plain"  # the recorded text is already the recogniser's writing
        raw["caller_voice"] = voice
    elif final_secs is not None:
        raw["caller_voice"] = {"asr_final_secs": min(5.0, final_secs)}
    model: dict[str, Any] = dict(source.model.model_dump(mode="json", include={
        "system", "fallback", "summary", "first_token_secs", "token_secs"})) if source is not None else {}
    prompt = _prompt(timeline)
    if prompt is not None and source is None:
        model["system"] = prompt
    if not live_model:
        model["decisions"] = _model_decisions(timeline)
    raw["model"] = model
    raw["caller"] = turns
    return raw


