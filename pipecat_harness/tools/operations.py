"""Where the gate keeps its write operations: in memory, or in a durable :class:`OperationStore` (the ledger).

Both hold one record per logical operation under its idempotency key and follow the ledger's state machine
(:func:`check_transition`) with the same compare-and-set, fencing and lease rules, so the gate behaves the same with or
without a database; only the ledger survives a restart and is shared between processes. Leases are written and compared
on :meth:`Operations.now`: the ledger's (database) time, or this process's clock in memory.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, Protocol

from pipecat_harness.tools.operation_state import (
    IdempotencyConflict,
    InvalidTransition,
    OperationRecord,
    OperationStatus,
    Reconciler,
    ResourceBusy,
    check_transition,
    unfenced,
)
from pipecat_harness.tools.owners import handler_may_run

__all__ = ["MemoryOperations", "OperationStore", "Operations"]

S = OperationStatus


class OperationStore(Protocol):
    """A durable store of operations shared by processes (:class:`~pipecat_harness.tools.ledger.OperationLedger`)."""

    async def create_tables(self) -> None:
        """Create or upgrade the store's tables."""

    def operations(self, tenant: str) -> Operations:
        """The store's records of ``tenant``, as the gate uses them."""


class Operations(Protocol):
    """The operation store the gate uses."""

    ledger: OperationStore | None
    #: ``start``, ``claim`` and ``settle`` never suspend (an in-process store): awaited in place, no task.
    inline: bool

    def now(self) -> float:
        """The time leases are written and compared on."""

    def start(self, key: str, op_type: str, request_hash: str, scope: str, owner: str,
              lease_until: float, resource: str = "") -> Awaitable[tuple[OperationRecord, bool]]:
        """Create the operation ``executing`` under ``owner``, or return the stored one (``False``).

        A store's future is begun already and resolved whether or not it is waited for (then
        :func:`~pipecat_harness.tools.store_calls.owned` needs no task); ``ResourceBusy`` if another operation on
        ``resource`` is executing or of unknown outcome.
        """

    async def get(self, key: str) -> OperationRecord | None:
        """The stored operation."""

    async def claim(self, record: OperationRecord, owner: str, lease_until: float) -> OperationRecord | None:
        """Start a new attempt of a retryable record; ``None`` when someone else changed it first."""

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None, lease_until: float = 0.0) -> OperationRecord:
        """Record an outcome; a record that no longer permits it is returned as stored."""

    async def release(self, record: OperationRecord) -> None:
        """End the owner's lease (its handler was stopped)."""

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler,
                        grace_secs: float = 0.0) -> OperationRecord:
        """Ask the backend about an ``outcome_unknown`` operation (a failed answer only for a voided attempt)."""

    async def recover(self, scope_prefix: str, grace_secs: float = 0.0) -> list[OperationRecord]:
        """Move records of a call left ``executing`` by a gone owner to ``outcome_unknown``."""

    async def unknown(self, scope_prefix: str) -> list[OperationRecord]:
        """Operations of a call whose outcome is unknown."""

    async def unsettled_on(self, scope_prefix: str, resource: str) -> list[OperationRecord]:
        """Operations of a call on ``resource`` that are executing or of unknown outcome."""


class MemoryOperations:
    """Operations held in process memory (the gate's default)."""

    ledger: OperationStore | None = None
    inline = True

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._records: dict[str, OperationRecord] = {}

    def now(self) -> float:
        """See :class:`Operations`."""
        return time.time()

    def _claim_resource(self, key: str, resource: str) -> None:
        if resource and any(r.resource == resource and r.idempotency_key != key
                            and r.status in (S.EXECUTING, S.OUTCOME_UNKNOWN) for r in self._records.values()):
            raise ResourceBusy(f"resource {resource!r} has an unsettled operation")

    def _store(self, record: OperationRecord, status: OperationStatus, **changes: Any) -> OperationRecord | None:
        current = self._records[record.idempotency_key]
        if current.version != record.version:
            return None
        if not check_transition(current.status, status):
            return current
        updated = current.changed(status=status, version=current.version + 1, updated_at=time.time(), **changes)
        self._records[record.idempotency_key] = updated
        return updated

    async def start(self, key: str, op_type: str, request_hash: str, scope: str, owner: str,
                    lease_until: float, resource: str = "") -> tuple[OperationRecord, bool]:
        """See :class:`Operations`."""
        if (existing := self._records.get(key)) is not None:
            if existing.request_hash != request_hash or existing.op_type != op_type:
                raise IdempotencyConflict(f"idempotency key {key!r} was used for a different request")
            return existing, False
        self._claim_resource(key, resource)
        now = time.time()
        record = self._records[key] = OperationRecord(self.tenant, key, op_type, request_hash, S.EXECUTING, scope=scope,
                                                      attempt=1, created_at=now, updated_at=now, owner=owner,
                                                      lease_until=lease_until, resource=resource)
        return record, True

    async def get(self, key: str) -> OperationRecord | None:
        """See :class:`Operations`."""
        return self._records.get(key)

    async def claim(self, record: OperationRecord, owner: str, lease_until: float) -> OperationRecord | None:
        """See :class:`Operations`."""
        current = self._records.get(record.idempotency_key)
        if current is None or current.version != record.version or not current.retryable:
            return None
        self._claim_resource(current.idempotency_key, current.resource)
        return self._store(current, S.EXECUTING, attempt=current.attempt + 1, owner=owner, lease_until=lease_until)

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None, lease_until: float = 0.0) -> OperationRecord:
        """See :class:`Operations`."""
        current = self._records[record.idempotency_key]
        if current.attempt != record.attempt:  # evidence about an earlier, fenced-off attempt
            return current
        try:
            updated = self._store(current, status, result=result, error=error, lease_until=lease_until)
        except InvalidTransition:
            return current
        return updated or current

    async def release(self, record: OperationRecord) -> None:
        """See :class:`Operations`."""
        current = self._records.get(record.idempotency_key)
        if current is not None and current.owner == record.owner and current.status != S.EXECUTING:
            self._records[record.idempotency_key] = current.changed(lease_until=0.0)

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler,
                        grace_secs: float = 0.0) -> OperationRecord:
        """See :class:`Operations`."""
        current = self._records[record.idempotency_key]
        if current.status != S.OUTCOME_UNKNOWN:
            return current
        answer = await reconciler(current)
        current = self._records[record.idempotency_key]
        if answer is None or current.status != S.OUTCOME_UNKNOWN or answer.status not in (S.SUCCEEDED, S.FAILED):
            return current
        if not answer.fences(current):
            unfenced(current, answer)
            return current
        if answer.status == S.FAILED and handler_may_run(current, time.time(), grace_secs):
            return current
        return await self.settle(current, answer.status, result=answer.result,
                                 error=answer.error or (current.error if answer.status == S.FAILED else None))

    async def recover(self, scope_prefix: str, grace_secs: float = 0.0) -> list[OperationRecord]:
        """See :class:`Operations`."""
        now = time.time()
        stale = [r for r in self._records.values() if r.status == S.EXECUTING and r.scope.startswith(scope_prefix)
                 and not handler_may_run(r, now, grace_secs)]
        return [await self.settle(r, S.OUTCOME_UNKNOWN, error="its owner stopped while it was executing")
                for r in stale]

    async def unknown(self, scope_prefix: str) -> list[OperationRecord]:
        """See :class:`Operations`."""
        return [r for r in self._records.values() if r.status == S.OUTCOME_UNKNOWN and r.scope.startswith(scope_prefix)]

    async def unsettled_on(self, scope_prefix: str, resource: str) -> list[OperationRecord]:
        """See :class:`Operations`."""
        return [r for r in self._records.values() if r.resource == resource and r.scope.startswith(scope_prefix)
                and r.status in (S.EXECUTING, S.OUTCOME_UNKNOWN)]
