"""The audit record (one row per verdict), the operator's review actions, and the sink rows go to (no SQL needed)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from pipecat_harness.grader.verdict import FLAGGED

__all__ = ["REVIEW_STATUS", "AuditRow", "AuditSink", "ReviewAction", "ReviewEvent"]

ReviewAction = Literal["acknowledge", "override", "escalate"]
#: Review action -> the status it leaves the row in.
REVIEW_STATUS: dict[str, str] = {"acknowledge": "acknowledged", "override": "overridden", "escalate": "escalated"}


@dataclass
class AuditRow:
    """One graded claim of one assistant turn (1-based ``turn_id``), or a turn that could not be graded.

    The verdict fields are a ``Verdict``'s; ``utterance`` is what the caller heard; ``review_status`` is ``open`` or
    what the last review left (:data:`REVIEW_STATUS`); times are Unix times; ``id`` is set once written.
    """

    tenant: str
    call_id: str
    turn_id: int
    utterance: str
    caller_utterance: str | None
    verdict: str
    category: str
    claim: str = ""
    constraint_ref: str | None = None
    rationale: str = ""
    confidence: float = 0.0
    grader_model: str = ""
    constraints_version: str = ""
    severity: str = "info"
    review_status: str = "open"
    review_note: str = ""
    created_at: float = field(default_factory=time.time)
    reviewed_at: float | None = None
    id: int | None = None

    @property
    def flagged(self) -> bool:
        """Whether the row needs a human."""
        return self.verdict in FLAGGED

    def to_dict(self) -> dict[str, Any]:
        """Return the row as a JSON-serialisable mapping."""
        return asdict(self)


@dataclass(frozen=True)
class ReviewEvent:
    """One operator action on an audit row (``acknowledge``...): who, when, why, and the status it left."""

    row_id: int
    action: str
    status: str
    note: str
    actor: str
    at: float
    id: int | None = None


class AuditSink(Protocol):
    """Where a call's audit rows are written (:class:`~pipecat_harness.grader.audit.AuditStore` is one)."""

    async def create_tables(self) -> None:
        """Make the sink ready for rows (idempotent)."""

    async def write_many(self, rows: list[AuditRow]) -> list[AuditRow]:
        """Write the rows of one turn together; return them with ``id`` set."""

    async def close(self) -> None:
        """Release what the sink holds."""
