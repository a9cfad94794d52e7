"""The verdict schema every grader returns, and the interface graders share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["CATEGORIES", "FLAGGED", "SETTLED_CONFIDENCE", "Category", "Grader", "Verdict", "VerdictKind"]

#: ``not_graded``: the observer could not grade the turn (queue full, grader error).
VerdictKind = Literal["supported", "unsupported", "out_of_scope", "llm_flagged", "not_graded"]
#: ``none``: the category of a turn with no checkable claim.
Category = Literal["price", "hours", "policy", "capability", "action", "none"]
CATEGORIES: tuple[str, ...] = ("price", "hours", "policy", "capability", "action")
#: Rule verdicts below this confidence (offers, policy conditions, availability) go to the model in combined mode.
SETTLED_CONFIDENCE = 0.85
#: Verdicts that need a human to look at the turn.
FLAGGED: frozenset[str] = frozenset({"unsupported", "llm_flagged"})


@dataclass(frozen=True)
class Verdict:
    """A grader's judgement of one claim against a constraint (``px_basic``, ``ledger``): why, and how sure (0..1)."""

    verdict: VerdictKind
    claim: str
    category: Category
    constraint_ref: str | None = None
    rationale: str = ""
    confidence: float = 1.0

    @property
    def flagged(self) -> bool:
        """Whether a human should review it."""
        return self.verdict in FLAGGED

    def to_dict(self) -> dict[str, Any]:
        """Return the verdict as a JSON-serialisable mapping."""
        return asdict(self)


@runtime_checkable
class Grader(Protocol):
    """Anything that grades an agent utterance against a tenant's facts."""

    #: Identifies the grader in audit rows (``rules``, ``gemini-2.5-flash``...).
    model: str

    async def grade(self, agent_utterance: str, caller_utterance: str | None = None, *,
                    call_id: str | None = None) -> Sequence[Verdict]:
        """One verdict per claim of what the caller heard (none without a claim); ``call_id`` names its ledger."""
