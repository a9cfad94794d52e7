"""The analyzer interface: what one caller utterance changed on the checklist."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pipecat_harness.checklist.model import Checklist

__all__ = ["Analysis", "Analyzer", "AnalyzerError", "ItemUpdate", "Outcome"]

Outcome = Literal["reported", "denied", "detail"]
"""``reported``: the caller reports one; ``denied``: none (closes the item); ``detail``: a follow-up answer."""


class AnalyzerError(RuntimeError):
    """The analyzer could not produce a usable analysis (state is left untouched)."""


@dataclass(frozen=True)
class ItemUpdate:
    """One change to one checklist question.

    Parameters:
        question_id: The question the caller addressed.
        outcome: What they said about it.
        location: The location it applies to, when the caller named one.
        note: The caller's words that justify the update.
    """

    question_id: str
    outcome: Outcome
    location: str | None = None
    note: str = ""


@dataclass
class Analysis:
    """What an utterance changed.

    Parameters:
        updates: Per-question changes.
        locations: Locations the caller mentioned, in order.
        unexpected_topics: Topics raised that are not on the checklist.
        analyzer: Name of the analyzer that produced it.
    """

    updates: list[ItemUpdate] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    unexpected_topics: list[str] = field(default_factory=list)
    analyzer: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (what ``dataclasses.asdict`` gives, without its deep copies)."""
        return {**vars(self), "updates": [dict(vars(update)) for update in self.updates],
                "locations": list(self.locations), "unexpected_topics": list(self.unexpected_topics)}


class Analyzer(abc.ABC):
    """Turns a caller utterance into an :class:`Analysis` of the checklist."""

    name: str = "analyzer"

    @abc.abstractmethod
    async def analyze(self, checklist: Checklist, state: Any, utterance: str) -> Analysis:
        """Analyse ``utterance`` given the checklist and the call's state (``AnalyzerError``: no usable analysis).

        ``state`` is a ``ChecklistState``, not named here: its module imports this one.
        """
