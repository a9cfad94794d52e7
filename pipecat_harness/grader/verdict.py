"""The verdict schema every grader returns, and the interface graders share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["CATEGORIES", "FLAGGED", "SETTLED_CONFIDENCE", "Category", "Grader", "Verdict", "VerdictKind"]

VerdictKind = Literal["supported", "unsupported", "out_of_scope", "llm_flagged", "not_graded"]
"""``not_graded`` is written by the observer when a turn could not be graded (queue full, grader error)."""

Category = Literal["price", "hours", "policy", "capability", "action", "none"]
"""``none`` is the category of a turn with no checkable claim."""

CATEGORIES: tuple[str, ...] = ("price", "hours", "policy", "capability", "action")

#: Rule verdicts below this confidence are not settled: capability offers, policy conditions, availability. The combined
#: grader asks the model about them.
SETTLED_CONFIDENCE = 0.85

#: Verdicts that need a human to look at the turn.
FLAGGED: frozenset[str] = frozenset({"unsupported", "llm_flagged"})


@dataclass(frozen=True)
class Verdict:
    """A grader's judgement of one claim as said, against a constraint (``px_basic``, ``policies.refund``, ``ledger``).

    ``rationale`` says why in one sentence; ``confidence`` is 0..1.
    """

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
        """Return one verdict per claim; an empty list when the utterance makes no claim.

        Args:
            agent_utterance: What the caller heard.
            caller_utterance: The caller's preceding turn, as context.
            call_id: The call, for claims checked against its operation ledger.
        """
        ...
