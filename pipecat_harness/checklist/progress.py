"""Per-call checklist state (a JSON record any worker can pick up from the store) and how an analysis changes it."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from pipecat_harness.checklist.analysis import Analysis, ItemUpdate
from pipecat_harness.checklist.model import Checklist, Question
from pipecat_harness.state.store import JsonText
from pipecat_harness.validation import describe_validation_error

__all__ = ["ChecklistState", "ItemState", "ItemStatus", "apply_analysis", "item_key", "split_key"]


class ItemStatus(enum.StrEnum):
    """Where one checklist item stands."""

    OPEN = "open"
    FOLLOW_UP_PENDING = "follow_up_pending"
    ANY_OTHER_PENDING = "any_other_pending"
    ANSWERED = "answered"
    DENIED = "denied"

    @property
    def closed(self) -> bool:
        """Whether nothing more needs asking about the item."""
        return self in (ItemStatus.ANSWERED, ItemStatus.DENIED)


def item_key(question_id: str, location: str | None = None) -> str:
    """State key of a question, optionally scoped to one location."""
    return f"{question_id}@{location}" if location else question_id


def split_key(key: str) -> tuple[str, str | None]:
    """Inverse of :func:`item_key`."""
    question_id, _, location = key.partition("@")
    return question_id, location or None


@dataclass
class ItemState:
    """State of one item (a question, or a question at one location)."""

    status: ItemStatus = ItemStatus.OPEN
    reports: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class ChecklistState:
    """Everything known about one call's progress through the checklist.

    Parameters:
        call_id: The call.
        items: Item key -> state; keys absent from it are open.
        locations: Locations the caller mentioned, in order.
        pending_topics: Unexpected topics still to follow up.
        addressed_topics: Unexpected topics already followed up.
        closing_index: Next closing step to emit once every item is closed.
        analyzed_turns: How many caller utterances have been analysed.
        last_directive: The directive most recently given to the model.
        asked: Ask keys of every directive issued, in order.
        version: Incremented on every saved change.
    """

    call_id: str
    items: dict[str, ItemState] = field(default_factory=dict)
    locations: list[str] = field(default_factory=list)
    pending_topics: list[str] = field(default_factory=list)
    addressed_topics: list[str] = field(default_factory=list)
    closing_index: int = 0
    analyzed_turns: int = 0
    last_directive: dict[str, Any] | None = None
    asked: list[str] = field(default_factory=list)
    version: int = 0

    @property
    def scoped(self) -> bool:
        """Whether per-location questions are asked per location."""
        return len(self.locations) >= 2

    def keys_for(self, question: Question) -> list[str]:
        """Item keys a question expands to under the current scoping."""
        if question.per_location and self.scoped:
            return [item_key(question.id, loc) for loc in self.locations]
        return [question.id]

    def status(self, key: str) -> ItemStatus:
        """Status of an item; a location item inherits a closed unscoped answer."""
        if key in self.items:
            return self.items[key].status
        question_id, location = split_key(key)
        if location is not None and question_id in self.items and self.items[question_id].status.closed:
            return self.items[question_id].status
        return ItemStatus.OPEN

    def item(self, key: str) -> ItemState:
        """The mutable state of an item, created on first use (with the status it inherits, if any)."""
        return self.items.setdefault(key, ItemState(status=self.status(key)))

    def all_keys(self, checklist: Checklist) -> list[str]:
        """Every item key in asking order."""
        return [key for question in checklist.questions for key in self.keys_for(question)]

    def all_closed(self, checklist: Checklist) -> bool:
        """Whether every item is answered or denied."""
        return all(self.status(key).closed for key in self.all_keys(checklist))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return _STATE.dump_python(self, mode="json")

    def to_json(self) -> JsonText:
        """:meth:`to_dict` as JSON text, encoded in one pass (a store writes it as it is)."""
        try:
            return JsonText(_STATE.dump_json(self).decode())
        except PydanticSerializationError:
            # Text with a lone surrogate (a caller's words can carry one) has no UTF-8 form; escaped, it has.
            return JsonText(json.dumps(self.to_dict()))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChecklistState:
        """Rebuild from :meth:`to_dict` output (``ValueError`` if it is not a checklist state)."""
        try:
            return _STATE.validate_python(data)
        except ValidationError as exc:
            raise ValueError(f"not a checklist state: {describe_validation_error(exc)}") from exc


_STATE: TypeAdapter[ChecklistState] = TypeAdapter(ChecklistState)


def _target_keys(checklist: Checklist, state: ChecklistState, update: ItemUpdate) -> list[str]:
    question = checklist.question(update.question_id)
    if not (question.per_location and state.scoped):
        return [question.id]
    if update.location and update.location in state.locations:
        return [item_key(question.id, update.location)]
    last_targets = (state.last_directive or {}).get("targets", [])
    scoped = [k for k in last_targets if split_key(k)[0] == question.id and split_key(k)[1]]
    return scoped or [k for k in state.keys_for(question) if not state.status(k).closed] or state.keys_for(question)


def _after_detail(question: Question) -> ItemStatus:
    return ItemStatus.ANY_OTHER_PENDING if question.any_other else ItemStatus.ANSWERED


def _apply_update(checklist: Checklist, state: ChecklistState, update: ItemUpdate) -> list[dict[str, Any]]:
    question = checklist.question(update.question_id)
    changes = []
    for key in _target_keys(checklist, state, update):
        item = state.item(key)
        before = item.status
        if update.outcome == "denied":
            if before in (ItemStatus.OPEN, ItemStatus.FOLLOW_UP_PENDING):
                item.status = ItemStatus.DENIED if item.reports == 0 else ItemStatus.ANSWERED
            elif before == ItemStatus.ANY_OTHER_PENDING:
                item.status = ItemStatus.ANSWERED
        elif update.outcome in ("reported", "detail") and before == ItemStatus.FOLLOW_UP_PENDING:
            item.status = _after_detail(question)
        elif update.outcome == "reported" and (before != ItemStatus.ANSWERED or item.reports == 0):
            item.reports += 1
            item.status = ItemStatus.FOLLOW_UP_PENDING if question.follow_up else _after_detail(question)
        elif update.outcome == "detail" and before == ItemStatus.OPEN:
            item.reports += 1
            item.status = _after_detail(question)
        if update.note:
            item.notes.append(update.note)
        if item.status != before:
            changes.append({"item": key, "from": before.value, "to": item.status.value})
    return changes


def apply_analysis(checklist: Checklist, state: ChecklistState, analysis: Analysis) -> list[dict[str, Any]]:
    """Apply one utterance's analysis to ``state``; return the status changes.

    It also advances the last directive's flow: a followed-up topic is addressed, an emitted closing step done.
    """
    changes: list[dict[str, Any]] = []
    state.locations.extend(loc for loc in dict.fromkeys(analysis.locations) if loc not in state.locations)
    for update in analysis.updates:
        if checklist.has_question(update.question_id):
            changes.extend(_apply_update(checklist, state, update))
    last = state.last_directive or {}
    if last.get("kind") == "topic":
        for topic in last.get("targets", []):
            if topic in state.pending_topics:
                state.pending_topics.remove(topic)
                state.addressed_topics.append(topic)
    if last.get("kind") == "closing" and state.closing_index == int(last.get("step", -1)):
        state.closing_index += 1
        changes.append({"closing_step": state.closing_index})
    known = {*state.pending_topics, *state.addressed_topics}
    state.pending_topics.extend(topic for topic in dict.fromkeys(analysis.unexpected_topics)
                                if topic and topic not in known)
    state.analyzed_turns += 1
    return changes
