"""The operation state machine: states, allowed transitions, records and errors.

Re-observing the current state changes nothing; any transition but these raises :class:`InvalidTransition`::

    prepared ──► executing ──► succeeded | failed | outcome_unknown
    prepared ──► cancelled
    outcome_unknown ──► succeeded | failed        (reconciliation)
    failed | cancelled ──► executing              (a new attempt, same key)

Each attempt's number goes to the backend with the key (:attr:`OperationRecord.fencing_key`): a reconciler may
answer ``failed`` only for an attempt the backend voided, so a late copy of it is refused.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loguru import logger

__all__ = ["TRANSITIONS", "ConcurrentUpdate", "IdempotencyConflict", "InvalidTransition", "LedgerError",
           "OperationRecord", "OperationRefused", "OperationStatus", "Reconciler", "Reconciliation", "ResourceBusy",
           "check_transition", "unfenced"]


class OperationStatus(enum.StrEnum):
    """Where an operation is in its life."""

    PREPARED = "prepared"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    CANCELLED = "cancelled"


S = OperationStatus

#: Allowed transitions (besides re-observing the current state).
TRANSITIONS: dict[OperationStatus, frozenset[OperationStatus]] = {
    S.PREPARED: frozenset({S.EXECUTING, S.CANCELLED}),
    S.EXECUTING: frozenset({S.SUCCEEDED, S.FAILED, S.OUTCOME_UNKNOWN}),
    S.OUTCOME_UNKNOWN: frozenset({S.SUCCEEDED, S.FAILED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset({S.EXECUTING}),
    S.CANCELLED: frozenset({S.EXECUTING}),
}


class LedgerError(RuntimeError):
    """Base class of ledger errors."""


class InvalidTransition(LedgerError):
    """A transition the state machine does not allow."""


class IdempotencyConflict(LedgerError):
    """The idempotency key was already used for a different request."""


class OperationRefused(Exception):
    """Raised by a write handler when the backend definitively said no, as returning ``{"error": ...}`` is.

    Any other exception is ambiguous (the request may have reached the backend): the outcome becomes unknown.
    """


class ResourceBusy(LedgerError):
    """Another operation on the same resource is executing or of unknown outcome."""


class ConcurrentUpdate(LedgerError):
    """The record changed under us to a state that does not permit the transition."""


def check_transition(current: OperationStatus, new: OperationStatus) -> bool:
    """Return ``True`` for an allowed change, ``False`` for re-observing ``current`` (``InvalidTransition`` else)."""
    if current == new:
        return False
    if new not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing (final state)"
        raise InvalidTransition(f"operation cannot go from {current} to {new}; from {current} only: {allowed}")
    return True


@dataclass(frozen=True)
class OperationRecord:
    """One operation as stored (``op_type``: the tool; ``scope``: ``<call id>:<tool>:<request hash>``).

    ``attempt`` counts executions started; ``owner`` runs the handler until ``lease_until`` (0: none runs); a different
    write on ``resource`` waits while this one is unsettled.
    """

    tenant: str
    idempotency_key: str
    op_type: str
    request_hash: str
    status: OperationStatus
    result: Any = None
    error: str | None = None
    version: int = 1
    scope: str = ""
    attempt: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
    owner: str = ""
    lease_until: float = 0.0
    resource: str = ""

    @property
    def fencing_key(self) -> str:
        """``<key>#<attempt>``: what the handler sends the backend, so one attempt can be voided by itself."""
        return f"{self.idempotency_key}#{self.attempt}"

    def changed(self, **changes: Any) -> OperationRecord:
        """A copy with ``changes``: :func:`dataclasses.replace` without re-running ``__init__`` (writes make many)."""
        copy = object.__new__(OperationRecord)
        fields = copy.__dict__
        fields.update(self.__dict__)
        if unknown := [name for name in changes if name not in fields]:
            raise TypeError(f"OperationRecord has no field {unknown[0]!r}")
        fields.update(changes)
        return copy

    @property
    def settled(self) -> bool:
        """Whether the outcome is final (succeeded, failed or cancelled)."""
        return self.status in (S.SUCCEEDED, S.FAILED, S.CANCELLED)

    @property
    def retryable(self) -> bool:
        """Whether a new attempt may start (never executed, or the backend definitively said no)."""
        return self.status in (S.PREPARED, S.FAILED, S.CANCELLED)


@dataclass(frozen=True)
class Reconciliation:
    """What the backend says became of an operation of unknown outcome (``succeeded`` or ``failed``).

    A ``failed`` answer applies only with ``voided`` the record's current attempt (the backend will refuse its late
    copies): "not found" alone leaves the outcome unknown.
    """

    status: OperationStatus
    result: Any = None
    error: str | None = None
    voided: int | None = None

    def fences(self, record: OperationRecord) -> bool:
        """Whether this answer may be applied to ``record`` (``succeeded``, or ``failed`` for its voided attempt)."""
        return self.status == S.SUCCEEDED or (self.status == S.FAILED and self.voided == record.attempt)


Reconciler = Callable[[OperationRecord], Awaitable[Reconciliation | None]]
"""Asks the backend for an operation's real outcome; ``None`` while it cannot tell."""


def unfenced(record: OperationRecord, answer: Reconciliation) -> None:
    """Say loudly that a reconciler answered ``failed`` without voiding the attempt (the answer is not applied)."""
    logger.error(f"reconciler answered failed for {record.idempotency_key} attempt {record.attempt} without voiding it "
                 f"(voided={answer.voided}); the outcome stays unknown. Void the attempt at the backend and return "
                 "Reconciliation(FAILED, voided=record.attempt)")
