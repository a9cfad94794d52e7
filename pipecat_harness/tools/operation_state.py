"""The operation state machine: states, allowed transitions, records and errors.

States and the only transitions allowed::

    prepared ──► executing ──► succeeded | failed | outcome_unknown
    prepared ──► cancelled
    outcome_unknown ──► succeeded | failed        (reconciliation)
    failed | cancelled ──► executing              (a new attempt, same key)

Observing the state a record is already in again is allowed and changes
nothing; any other transition raises :class:`InvalidTransition`.

Only a definitive failure (the backend said no) or a cancellation before the
handler ran permits another attempt; an ``outcome_unknown`` record must be
reconciled to ``succeeded`` or ``failed`` first.

Fencing: every attempt has its number (``attempt``, the fencing token), which
the handler sends to the backend with the key (:attr:`OperationRecord.fencing_key`).
A reconciler may answer ``failed`` only for an attempt the backend has voided
(a late copy of that attempt will be refused) or that provably never left;
it says so with ``Reconciliation(FAILED, voided=record.attempt)``. A ``failed``
answer for any other attempt is never applied: the outcome stays unknown.
While a record is ``executing`` its owner holds a lease (``owner``,
``lease_until``), so that nobody starts the same operation beside it.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loguru import logger

__all__ = [
    "TRANSITIONS",
    "ConcurrentUpdate",
    "IdempotencyConflict",
    "InvalidTransition",
    "LedgerError",
    "OperationRecord",
    "OperationRefused",
    "OperationStatus",
    "Reconciler",
    "Reconciliation",
    "ResourceBusy",
    "check_transition",
    "unfenced",
]


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
    """Raised by a write handler when the backend definitively said no (nothing was applied).

    Any other exception from a write handler is ambiguous (the request may
    have reached the backend): the operation becomes ``outcome_unknown``.
    Returning ``{"error": ...}`` is a definitive failure too.
    """


class ResourceBusy(LedgerError):
    """Another operation on the same resource is executing or of unknown outcome."""


class ConcurrentUpdate(LedgerError):
    """The record changed under us to a state that does not permit the transition."""


def check_transition(current: OperationStatus, new: OperationStatus) -> bool:
    """Return whether ``current → new`` changes anything.

    Returns:
        ``False`` for a duplicate observation (``current == new``), ``True`` for an allowed change.

    Raises:
        InvalidTransition: The state machine forbids the transition.
    """
    if current == new:
        return False
    if new not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing (final state)"
        raise InvalidTransition(f"operation cannot go from {current} to {new}; from {current} only: {allowed}")
    return True


@dataclass(frozen=True)
class OperationRecord:
    """One operation as stored.

    Parameters:
        tenant: Tenant the operation belongs to.
        idempotency_key: Unique per tenant; one key is executed at most once.
        op_type: What kind of operation (the tool name).
        request_hash: Hash of the canonical request.
        status: Current state.
        result: The handler's result (JSON), when known.
        error: Why it failed or is unknown.
        version: Incremented by every change (compare-and-set).
        scope: The call the operation belongs to, then tool and request
            (``<call id>:<tool>:<request hash>``).
        attempt: Executions started so far (0 while prepared, 1 for the first).
        owner: The gate instance that runs (or last ran) the handler.
        lease_until: Until when the owner's handler may still be running
            (0: no handler is running).
        resource: What the write changes (an order, the caller's callback),
            so that a different write on it waits while this one is unsettled.
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
        """A copy with ``changes`` (what :func:`dataclasses.replace` does, without re-running ``__init__``).

        Every write makes two or three copies; this keeps them cheap.
        """
        copy = object.__new__(OperationRecord)
        fields = copy.__dict__
        fields.update(self.__dict__)
        for name in changes:
            if name not in fields:
                raise TypeError(f"OperationRecord has no field {name!r}")
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
    """What the business backend says happened to an operation of unknown outcome.

    Parameters:
        status: ``succeeded`` (it was applied) or ``failed``.
        result: The applied operation's result.
        error: Why it failed.
        voided: For ``failed``: the attempt the backend has voided, so that a
            request of that attempt still on the wire is refused when it lands
            (or that attempt provably never left). "Not found" alone is not
            ``failed``: a ``failed`` answer whose ``voided`` is not the record's
            current attempt leaves the outcome unknown.
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
    logger.error(f"reconciler answered failed for {record.idempotency_key} attempt {record.attempt} without voiding "
                 f"it (voided={answer.voided}); the outcome stays unknown. Void the attempt at the backend and "
                 f"return Reconciliation(FAILED, voided=record.attempt)")
