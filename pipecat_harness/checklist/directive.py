"""The next directive: what the model should ask on this turn, derived from the state.

Priority: the closing flow once every item is closed; otherwise an unexpected topic the caller raised; then a
pending follow-up; then "any other X?"; then the next open question, paired with its partner when both are
open. Computing a directive never changes the state; :func:`mark_issued` records it once given to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pipecat_harness.checklist.model import Checklist, Question
from pipecat_harness.checklist.progress import ChecklistState, ItemStatus, item_key, split_key

__all__ = ["DEFAULT_MARKER", "Directive", "DirectiveKind", "mark_issued", "next_directive"]

DEFAULT_MARKER = "[CHECKLIST DIRECTIVE]"
"""Every line of a rendered directive starts with this, so old ones can be removed by prefix."""

DirectiveKind = Literal["question", "pair", "follow_up", "any_other", "topic", "closing", "done"]


@dataclass(frozen=True)
class Directive:
    """What the model is told to do on this turn.

    Parameters:
        kind: The kind of step.
        targets: Item keys (or the topic, for ``topic``) it is about.
        instruction: What the model should do.
        wording: A suggested phrasing for the caller.
        ask_keys: Keys recorded in ``state.asked`` when issued.
        step: Closing step index (``closing`` only).
        end_call: Whether the call should end after this step.
    """

    kind: DirectiveKind
    targets: tuple[str, ...]
    instruction: str
    wording: str = ""
    ask_keys: tuple[str, ...] = field(default_factory=tuple)
    step: int = -1
    end_call: bool = False

    def render(self, marker: str = DEFAULT_MARKER) -> str:
        """The system block given to the model; every line starts with ``marker``."""
        lines = [f"{marker} {self.instruction}"]
        if self.wording:
            lines.append(f'{marker} Suggested wording: "{self.wording}"')
        lines.append(f"{marker} Ask nothing else from the checklist on this turn.")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (stored as ``state.last_directive``; the fields in declaration order)."""
        return {**vars(self), "targets": list(self.targets), "ask_keys": list(self.ask_keys)}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _at(location: str | None) -> str:
    return f" at the {location}" if location else ""


def _ask_text(question: Question, location: str | None) -> str:
    return f"At the {location}: {_lower_first(question.ask)}" if location else question.ask


def _partner_key(checklist: Checklist, state: ChecklistState, question: Question, location: str | None) -> str | None:
    if not question.pair_with:
        return None
    partner = checklist.question(question.pair_with)
    key = item_key(partner.id, location if partner.per_location and state.scoped else None)
    return key if key in state.keys_for(partner) and state.status(key) == ItemStatus.OPEN else None


def _summary(checklist: Checklist, state: ChecklistState) -> str:
    answered = [split_key(key) for key in state.all_keys(checklist) if state.status(key) == ItemStatus.ANSWERED]
    reported = [f"{checklist.question(question_id).topic_name}{_at(location)}" for question_id, location in answered]
    return "reported " + ", ".join(reported) if reported else "nothing to report on any item"


def next_directive(checklist: Checklist, state: ChecklistState) -> Directive:
    """Return the directive for the current state (pure: the state is not changed)."""
    if state.pending_topics:
        topic = state.pending_topics[0]
        instruction = (f'The caller raised something not on the checklist: "{topic}". Acknowledge it and ask one '
                       "short follow-up question about it before returning to the checklist.")
        wording = f"You mentioned {topic}. Could you tell me a bit more about that?"
        return Directive("topic", (topic,), instruction, wording, (f"topic:{topic}",))
    keys = state.all_keys(checklist)
    for wanted in (ItemStatus.FOLLOW_UP_PENDING, ItemStatus.ANY_OTHER_PENDING):
        for key in keys:
            if state.status(key) != wanted:
                continue
            question_id, location = split_key(key)
            question = checklist.question(question_id)
            subject = f"{question.topic_name}{_at(location)}"
            reports = state.items[key].reports if key in state.items else 0
            if wanted == ItemStatus.FOLLOW_UP_PENDING:
                instruction = f"Follow up on the {subject}: {question.follow_up}"
                wording = f"Could you tell me a bit more about the {subject}?"
                return Directive("follow_up", (key,), instruction, wording, (f"follow_up:{key}#{reports}",))
            instruction = f"{question.any_other} (scope: {location})" if location else str(question.any_other)
            return Directive("any_other", (key,), instruction, f"Any other {subject}?", (f"any_other:{key}#{reports}",))
    for key in keys:
        if state.status(key) != ItemStatus.OPEN:
            continue
        question_id, location = split_key(key)
        question = checklist.question(question_id)
        partner = _partner_key(checklist, state, question, location)
        if partner is not None:
            other = checklist.question(split_key(partner)[0])
            wording = f"{_ask_text(question, location)} And {_lower_first(other.ask)}"
            instruction = f"Ask these two questions together, naturally, in one turn: {wording}"
            return Directive("pair", (key, partner), instruction, wording, (f"ask:{key}", f"ask:{partner}"))
        wording = _ask_text(question, location)
        return Directive("question", (key,), f"Ask the next checklist question: {wording}", wording, (f"ask:{key}",))
    if state.closing_index < len(checklist.closing):
        step = checklist.closing[state.closing_index]
        instruction, wording = step.instruction, step.wording
        if step.id == "summary":
            summary = _summary(checklist, state)
            wording = f"To sum up: {summary}. Is that right?"
            instruction = f"{instruction} What was covered: {summary}."
        instruction = f"Closing step {state.closing_index + 1} of {len(checklist.closing)}: {instruction}"
        ask_keys = (f"closing:{step.id}",)
        return Directive("closing", (step.id,), instruction, wording, ask_keys, state.closing_index, step.end_call)
    done = "The checklist and the closing are complete. Reply briefly and ask no further questions."
    return Directive("done", (), done)


def mark_issued(state: ChecklistState, directive: Directive) -> bool:
    """Record that ``directive`` was given to the model this caller turn; whether it was newly recorded.

    Re-issuing the same directive within the turn (the model runs again after a tool result) records nothing.
    """
    record = {**directive.to_dict(), "turn": state.analyzed_turns}
    last = state.last_directive or {}
    if last.get("turn") == state.analyzed_turns and last.get("ask_keys") == record["ask_keys"]:
        return False
    state.last_directive = record
    state.asked.extend(directive.ask_keys)
    return True
