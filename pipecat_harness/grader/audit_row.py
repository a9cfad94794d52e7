"""The audit record: one row per verdict, the operator's review actions, and the sink rows go to.

Plain dataclasses with no database library behind them, so grading, alerts and the observer run on a base install;
:class:`~pipecat_harness.grader.audit.AuditStore` (the ``sqlite`` extra) is the SQL sink.
"""

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
    """One graded claim of one assistant turn (or a turn that could not be graded).

    Parameters:
        tenant: Tenant whose facts were checked.
        call_id: The call.
        turn_id: The assistant turn within the call (1-based).
        utterance: What the caller heard.
        caller_utterance: The caller's preceding turn.
        verdict: ``supported``, ``unsupported``, ``out_of_scope``, ``llm_flagged`` or ``not_graded``.
        category: ``price``, ``hours``, ``policy``, ``capability``, ``action`` or ``none``.
        claim: The claim judged.
        constraint_ref: The constraint it was checked against.
        rationale: Why.
        confidence: 0..1.
        grader_model: ``rules``, a model name, or ``rules+<model>``.
        constraints_version: Version of the constraint list used.
        severity: ``critical``, ``warning`` or ``info``.
        review_status: ``open``, ``acknowledged``, ``overridden`` or ``escalated``.
        review_note: The operator's note.
        created_at: Unix time the row was written.
        reviewed_at: Unix time of the last review action.
        id: Row id, set once written.
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
    """One operator action on an audit row: who did what, when, and why.

    Parameters:
        row_id: The audit row.
        action: ``acknowledge``, ``override`` or ``escalate``.
        status: The review status it left the row in.
        note: The operator's note.
        actor: Who acted.
        at: Unix time of the action.
        id: Event id.
    """

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
