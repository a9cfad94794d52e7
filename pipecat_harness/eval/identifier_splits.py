"""Ground truth for input waiting: which caller pauses cut an identifier, and which turns were held needlessly.

The simulator records what the caller said (the script) and when each piece of speech was finalised; the trace records
when each user turn was submitted to the model. From those two records, independent of any control's own rules:

* an **identifier pause** is a pause inside one caller turn where the speech on both sides of it is identifier material
  (digits, spelled letters, NATO words, "double", "as in"): ``"It's W four eight one seven" ... "four two zero"``.
* it was **submitted early** when a user turn was submitted after the first part was transcribed and before the second
  part was: the model saw half an identifier.
* a hold was **needless** when the identifier hold held a turn end and the caller then said nothing more in that turn:
  the utterance was complete and the caller waited in silence for the hold to expire. The added wait is the time from
  the hold to the submission of that turn.
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
_SPELLING_WORDS = {"double", "triple", "as", "in"}


def is_identifier_token(token: str) -> bool:
    """Whether a spoken word is identifier material (a digit, a letter, a NATO word, a connector)."""
    word = re.sub(r"[^\w'-]", "", token).lower()
    if not word:
        return False
    if word.isdigit() or (len(word) == 1 and word.isalpha()):
        return True
    if re.fullmatch(r"[a-z]*\d[a-z\d]*", word):  # "w237", "2b"
        return True
    if re.fullmatch(r"(?:[a-z]|\d+)(?:-(?:[a-z]|\d+))+", word):  # recogniser groupings: "w-237", "c-f-a-0"
        return True
    return word in DIGIT_WORDS or word in NATO_WORDS or word in CONNECTOR_WORDS or word in _SPELLING_WORDS


@dataclass(frozen=True)
class IdentifierPause:
    """A pause inside a caller turn with identifier material on both sides.

    Parameters:
        turn: Index of the caller turn.
        before_final: Offset (from the turn's start) of the transcript of the part before the pause.
        after_final: Offset of the transcript of the part after it.
        before: The part before the pause.
        after: The part after it.
    """

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
    """Input-waiting figures of one call.

    Parameters:
        identifier_pauses: Pauses inside an identifier (the opportunities).
        submitted_early: Of those, how many had a user turn submitted in the middle.
        user_turns: User turns submitted to the model.
        holds: Turn ends the identifier hold held.
        needless_holds: Holds on turns the caller had already finished.
        added_wait_ms: Silence added by input controls (needless holds plus declared waits).
    """

    identifier_pauses: int = 0
    submitted_early: int = 0
    user_turns: int = 0
    holds: int = 0
    needless_holds: int = 0
    added_wait_ms: int = 0


def measure_input_waiting(scenario: Scenario, timeline: Timeline,
                          decisions: list[ControlDecision]) -> InputWaiting:
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
        if any(low <= t < high for t in submissions):
            figures.submitted_early += 1
    finals = [e.t for e in timeline.of("asr_final", lane="caller")]
    for decision in decisions:
        if decision.control == "identifier_hold" and decision.action == "held":
            figures.holds += 1
            turn_end = _turn_end(decision.at, sorted(turn_starts.values()))
            continued = any(decision.at < t < turn_end for t in finals)
            if not continued:
                figures.needless_holds += 1
                submitted = next((t for t in submissions if t >= decision.at - _TOLERANCE), decision.at)
                figures.added_wait_ms += round(max(0.0, submitted - decision.at) * 1000)
        elif decision.control != "identifier_hold" and decision.control in {"spelling", "silent_reply"}:
            figures.added_wait_ms += int(decision.evidence.get("added_wait_ms", 0) or 0)
    return figures


def _turn_end(at: float, starts: list[float]) -> float:
    """Start of the next caller turn after ``at`` (the end of the turn a decision fell in)."""
    return next((s for s in starts if s > at + _TOLERANCE), float("inf"))
