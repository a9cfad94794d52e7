"""Ground truth for input waiting, from the caller script and the trace, independent of any control's own rules.

An **identifier pause** is a pause inside a caller turn with identifier material on both sides (``"It's W four eight
one seven" ... "four two zero"``); it was **submitted early** when a user turn was submitted between the two parts'
transcripts. A hold was **needless** when the caller said nothing more in the held turn; its added wait runs from the
hold to the turn's submission.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from pipecat_harness.decisions import ControlDecision
from pipecat_harness.sim.caller import plan_turn
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.spoken import CONNECTOR_WORDS, DIGIT_WORDS, NATO_WORDS
from pipecat_harness.trace.timeline import Timeline

__all__ = ["IdentifierPause", "InputWaiting", "identifier_pauses", "is_identifier_token", "measure_input_waiting"]

# Events at the same virtual instant may be logged a hair apart.
_TOLERANCE = 0.005
_IDENTIFIER_WORDS = {*DIGIT_WORDS, *NATO_WORDS, *CONNECTOR_WORDS, "double", "triple", "as", "in"}
# "w237", "2b"; recogniser groupings: "w-237", "c-f-a-0"
_IDENTIFIER_SHAPES = re.compile(r"[a-z]*\d[a-z\d]*|(?:[a-z]|\d+)(?:-(?:[a-z]|\d+))+")


def is_identifier_token(token: str) -> bool:
    """Whether a spoken word is identifier material (a digit, a letter, a NATO word, a connector)."""
    word = re.sub(r"[^\w'-]", "", token).lower()
    return (word.isdigit() or (len(word) == 1 and word.isalpha()) or word in _IDENTIFIER_WORDS
            or _IDENTIFIER_SHAPES.fullmatch(word) is not None)


@dataclass(frozen=True)
class IdentifierPause:
    """A pause in caller turn ``turn``; ``before_final``/``after_final``: its parts' transcripts from the turn start."""

    turn: int
    before_final: float
    after_final: float
    before: str
    after: str


def identifier_pauses(scenario: Scenario) -> list[IdentifierPause]:
    """Every pause in the caller script that falls inside a spoken identifier."""
    found = []
    for index, turn in enumerate(scenario.caller):
        finals = [e for e in plan_turn(turn, scenario.caller_voice) if e.kind == "final" and e.closes_segment]
        for first, second in itertools.pairwise(finals):
            first_text, second_text = first.segment_text or first.text, second.segment_text or second.text
            before, after = first_text.split(), second_text.split()
            if before and after and is_identifier_token(before[-1]) and is_identifier_token(after[0]):
                found.append(IdentifierPause(index, first.offset, second.offset, first_text, second_text))
    return found


@dataclass
class InputWaiting:
    """Input-waiting figures of one call (``added_wait_ms``: needless holds plus the waits input controls declared)."""

    identifier_pauses: int = 0
    submitted_early: int = 0
    user_turns: int = 0
    holds: int = 0
    needless_holds: int = 0
    added_wait_ms: int = 0


def measure_input_waiting(scenario: Scenario, timeline: Timeline, decisions: list[ControlDecision]) -> InputWaiting:
    """Measure input waiting for one call from its script, its trace and its decisions."""
    turn_starts = {int(e.data.get("turn", -1)): e.t for e in timeline.of("caller_turn")}
    submissions = [e.t for e in timeline.of("submitted", lane="caller")]
    figures = InputWaiting(user_turns=len(submissions))
    for pause in identifier_pauses(scenario):
        start = turn_starts.get(pause.turn)
        if start is None:  # the caller hung up before this turn
            continue
        figures.identifier_pauses += 1
        low, high = start + pause.before_final - _TOLERANCE, start + pause.after_final - _TOLERANCE
        figures.submitted_early += any(low <= t < high for t in submissions)
    finals = [e.t for e in timeline.of("asr_final", lane="caller")]
    starts = sorted(turn_starts.values())
    for decision in decisions:
        if decision.control == "identifier_hold" and decision.action == "held":
            figures.holds += 1
            turn_end = next((s for s in starts if s > decision.at + _TOLERANCE), float("inf"))
            if not any(decision.at < t < turn_end for t in finals):
                figures.needless_holds += 1
                submitted = next((t for t in submissions if t >= decision.at - _TOLERANCE), decision.at)
                figures.added_wait_ms += round(max(0.0, submitted - decision.at) * 1000)
        elif decision.control in {"spelling", "silent_reply"}:
            figures.added_wait_ms += int(decision.evidence.get("added_wait_ms", 0) or 0)
    return figures
