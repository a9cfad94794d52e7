"""Where the gate keeps its write operations: in memory, or in an :class:`OperationLedger`.

Both stores follow the ledger's state machine (:func:`check_transition`), so the
gate behaves the same with or without a database; only the ledger survives a
process restart and is shared between processes.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

from pipecat_harness.tools.ledger import (
    InvalidTransition,
    OperationLedger,
    OperationRecord,
    OperationStatus,
    Reconciler,
    check_transition,
)

__all__ = ["LedgerOperations", "MemoryOperations", "Operations"]

S = OperationStatus


class Operations(Protocol):
    """The operation store the gate uses."""

    ledger: OperationLedger | None

    async def begin(self, scope: str, op_type: str, request_hash: str, attempt: int) -> OperationRecord:
        """Return the operation to run for a scope: a new or resumable ``prepared`` attempt, or a settled one."""

    async def claim(self, record: OperationRecord) -> OperationRecord | None:
        """Move ``prepared`` to ``executing``; ``None`` when someone else did."""

    async def cancel(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Move ``prepared`` to ``cancelled``."""

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None) -> OperationRecord:
        """Move ``executing`` to a final or unknown state."""

    async def settle_unknown(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                             error: str | None = None) -> OperationRecord:
        """Settle an operation of unknown outcome from new evidence (a late reply)."""

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler) -> OperationRecord:
        """Ask the backend about an ``outcome_unknown`` operation."""

    async def unknown(self, session_id: str, op_type: str | None, request_hash: str | None) -> list[OperationRecord]:
        """Operations of a session whose outcome is unknown (optionally of one request)."""


def _key(scope: str, attempt: int) -> str:
    return f"{scope}#{attempt}"


class MemoryOperations:
    """Operations held in process memory (the gate's default)."""

    ledger: OperationLedger | None = None

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._records: dict[str, OperationRecord] = {}
        self._latest: dict[str, str] = {}
        self._unknown: dict[str, OperationRecord] = {}

    def _store(self, record: OperationRecord, status: OperationStatus, **changes: Any) -> OperationRecord:
        current = self._records[record.idempotency_key]
        if not check_transition(current.status, status):
            return current
        updated = replace(current, status=status, version=current.version + 1, updated_at=time.time(), **changes)
        self._records[record.idempotency_key] = updated
        if status == S.OUTCOME_UNKNOWN:
            self._unknown[updated.idempotency_key] = updated
        else:
            self._unknown.pop(updated.idempotency_key, None)
        return updated

    async def begin(self, scope: str, op_type: str, request_hash: str, attempt: int) -> OperationRecord:
        """See :class:`Operations`."""
        latest = self._records.get(self._latest.get(scope, ""))
        if latest is not None:
            if latest.status in (S.SUCCEEDED, S.OUTCOME_UNKNOWN, S.PREPARED):
                return latest
            if latest.status == S.EXECUTING:
                return self._store(latest, S.OUTCOME_UNKNOWN, error="found executing with nobody running it")
            attempt = max(attempt, latest.attempt + 1)
        now = time.time()
        record = OperationRecord(self.tenant, _key(scope, attempt), op_type, request_hash, S.PREPARED,
                                 scope=scope, attempt=attempt, created_at=now, updated_at=now)
        self._records[record.idempotency_key] = record
        self._latest[scope] = record.idempotency_key
        return record

    async def claim(self, record: OperationRecord) -> OperationRecord | None:
        """See :class:`Operations`."""
        if self._records[record.idempotency_key].status != S.PREPARED:
            return None
        return self._store(record, S.EXECUTING)

    async def cancel(self, record: OperationRecord, reason: str) -> OperationRecord:
        """See :class:`Operations`."""
        return self._store(record, S.CANCELLED, error=reason)

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None) -> OperationRecord:
        """See :class:`Operations`."""
        return self._store(record, status, result=result, error=error)

    async def settle_unknown(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                             error: str | None = None) -> OperationRecord:
        """See :class:`Operations`."""
        try:
            return self._store(record, status, result=result, error=error)
        except InvalidTransition:  # already settled by the reconciler
            return self._records[record.idempotency_key]

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler) -> OperationRecord:
        """See :class:`Operations`."""
        current = self._records[record.idempotency_key]
        if current.status != S.OUTCOME_UNKNOWN:
            return current
        answer = await reconciler(current)
        if answer is None:
            return self._records[record.idempotency_key]
        return self._store(current, answer.status, result=answer.result, error=answer.error)

    async def unknown(self, session_id: str, op_type: str | None, request_hash: str | None) -> list[OperationRecord]:
        """See :class:`Operations`."""
        return [
            r for r in self._unknown.values()
            if r.scope.startswith(f"{session_id}:")
            and (op_type is None or r.op_type == op_type) and (request_hash is None or r.request_hash == request_hash)
        ]


class LedgerOperations:
    """Operations recorded in an :class:`OperationLedger` (survive restarts, shared by processes)."""

    def __init__(self, ledger: OperationLedger, tenant: str) -> None:
        self.ledger: OperationLedger | None = ledger
        self._ledger = ledger
        self.tenant = tenant

    async def begin(self, scope: str, op_type: str, request_hash: str, attempt: int) -> OperationRecord:
        """See :class:`Operations`."""
        latest = await self._ledger.latest_attempt(self.tenant, scope)
        if latest is not None:
            if latest.status in (S.SUCCEEDED, S.OUTCOME_UNKNOWN, S.PREPARED):
                return latest
            if latest.status == S.EXECUTING:
                # The gate holds the scope's lock, so an executing record is
                # left over from a process that stopped mid-write.
                return await self._ledger.mark_unknown(latest, "found executing with nobody running it")
            attempt = max(attempt, latest.attempt + 1)
        record, _ = await self._ledger.prepare(self.tenant, _key(scope, attempt), op_type, request_hash,
                                               scope=scope, attempt=attempt)
        return record

    async def claim(self, record: OperationRecord) -> OperationRecord | None:
        """See :class:`Operations`."""
        return await self._ledger.claim(record)

    async def cancel(self, record: OperationRecord, reason: str) -> OperationRecord:
        """See :class:`Operations`."""
        return await self._ledger.cancel(record, reason)

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None) -> OperationRecord:
        """See :class:`Operations`."""
        return await self._ledger.transition(record, status, result=result, error=error)

    async def settle_unknown(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                             error: str | None = None) -> OperationRecord:
        """See :class:`Operations`."""
        current = await self._ledger.get(record.tenant, record.idempotency_key) or record
        try:
            return await self._ledger.transition(current, status, result=result, error=error)
        except InvalidTransition:  # already settled by the reconciler
            return current

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler) -> OperationRecord:
        """See :class:`Operations`."""
        current = await self._ledger.get(record.tenant, record.idempotency_key) or record
        return await self._ledger.reconcile(current, reconciler)

    async def unknown(self, session_id: str, op_type: str | None, request_hash: str | None) -> list[OperationRecord]:
        """See :class:`Operations`."""
        records = await self._ledger.find(self.tenant, S.OUTCOME_UNKNOWN, op_type=op_type, request_hash=request_hash)
        return [r for r in records if r.scope.startswith(f"{session_id}:")]
