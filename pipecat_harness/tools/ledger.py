"""``OperationLedger``: one record per write, with idempotency and an exact state machine.

States and the only transitions allowed::

    prepared ──► executing ──► succeeded | failed | outcome_unknown
    prepared ──► cancelled
    outcome_unknown ──► succeeded | failed        (reconciliation)

Observing the state a record is already in again is allowed and changes
nothing; any other transition raises :class:`InvalidTransition`. Every change
is a compare-and-set on the record's version, and every change into a
terminal or unknown state writes its completion event to the outbox in the
same transaction.

A timeout is ``outcome_unknown``: the write may have happened, so it is never
retried blindly. :meth:`OperationLedger.reconcile` asks the business backend
for the real outcome.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import and_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pipecat_harness.tools.operation_state import (
    TRANSITIONS,
    ConcurrentUpdate,
    IdempotencyConflict,
    InvalidTransition,
    LedgerError,
    OperationRecord,
    OperationStatus,
    Reconciler,
    Reconciliation,
    check_transition,
)
from pipecat_harness.tools.storage import DEFAULT_LEDGER_URL, LedgerTables, ledger_tables, make_engine

__all__ = [
    "TRANSITIONS",
    "ConcurrentUpdate",
    "IdempotencyConflict",
    "InvalidTransition",
    "LedgerError",
    "OperationLedger",
    "OperationRecord",
    "OperationStatus",
    "Reconciler",
    "Reconciliation",
    "check_transition",
]


S = OperationStatus
_EVENT_STATES = frozenset({S.SUCCEEDED, S.FAILED, S.OUTCOME_UNKNOWN, S.CANCELLED})


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, sort_keys=True)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class OperationLedger:
    """Operation records and their outbox, on SQLite or PostgreSQL.

    Args:
        engine: An async SQLAlchemy engine, or a URL (``sqlite+aiosqlite:///ledger.db``,
            ``postgresql+asyncpg://user@host/db``). Defaults to in-memory SQLite.
        table_prefix: Prefix of the table names.
    """

    def __init__(self, engine: AsyncEngine | str = DEFAULT_LEDGER_URL, *, table_prefix: str = "harness_") -> None:
        self._owns_engine = isinstance(engine, str)
        self.engine: AsyncEngine = make_engine(engine) if isinstance(engine, str) else engine
        self.tables: LedgerTables = ledger_tables(table_prefix)
        self.clock: Callable[[], float] = time.time

    async def create_tables(self) -> None:
        """Create the tables if they do not exist."""
        async with self.engine.begin() as conn:
            await conn.run_sync(self.tables.metadata.create_all)

    async def drop_tables(self) -> None:
        """Drop the tables (tests and benchmarks)."""
        async with self.engine.begin() as conn:
            await conn.run_sync(self.tables.metadata.drop_all)

    async def close(self) -> None:
        """Dispose of the engine if the ledger created it."""
        if self._owns_engine:
            await self.engine.dispose()

    # -- reading -----------------------------------------------------------

    def _record(self, row: Any) -> OperationRecord:
        m = row._mapping
        return OperationRecord(
            tenant=m["tenant"], idempotency_key=m["idempotency_key"], op_type=m["op_type"],
            request_hash=m["request_hash"], status=OperationStatus(m["status"]), result=_loads(m["result"]),
            error=m["error"], version=m["version"], scope=m["scope"], attempt=m["attempt"],
            created_at=m["created_at"], updated_at=m["updated_at"],
        )

    async def get(self, tenant: str, idempotency_key: str) -> OperationRecord | None:
        """Return the record for a key, or ``None``."""
        ops = self.tables.operations
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                select(ops).where(and_(ops.c.tenant == tenant, ops.c.idempotency_key == idempotency_key))
            )).first()
        return self._record(row) if row is not None else None

    async def latest_attempt(self, tenant: str, scope: str) -> OperationRecord | None:
        """Return the newest attempt recorded for a scope, or ``None``."""
        ops = self.tables.operations
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                select(ops).where(and_(ops.c.tenant == tenant, ops.c.scope == scope))
                .order_by(ops.c.attempt.desc()).limit(1)
            )).first()
        return self._record(row) if row is not None else None

    async def find(
        self, tenant: str, status: OperationStatus, *, op_type: str | None = None, request_hash: str | None = None
    ) -> list[OperationRecord]:
        """Return the records of a tenant in one state (optionally of one request), oldest first."""
        ops = self.tables.operations
        condition = and_(ops.c.tenant == tenant, ops.c.status == status.value)
        if op_type is not None:
            condition = and_(condition, ops.c.op_type == op_type)
        if request_hash is not None:
            condition = and_(condition, ops.c.request_hash == request_hash)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(ops).where(condition).order_by(ops.c.created_at))).all()
        return [self._record(row) for row in rows]

    async def succeeded_operations(self, call_id: str) -> list[OperationRecord]:
        """Operations of one call that succeeded, oldest first.

        A gate's idempotency scopes start with its session id, which the
        harness sets to the call id; the per-turn grader checks "your refund
        is done" claims against these records.
        """
        ops = self.tables.operations
        condition = and_(ops.c.status == OperationStatus.SUCCEEDED.value,
                         ops.c.scope.startswith(f"{call_id}:", autoescape=True))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(ops).where(condition).order_by(ops.c.created_at))).all()
        return [self._record(row) for row in rows]

    async def records(self, tenant: str | None = None) -> list[OperationRecord]:
        """Return every record (of one tenant), oldest first."""
        ops = self.tables.operations
        query = select(ops).order_by(ops.c.created_at, ops.c.idempotency_key)
        if tenant is not None:
            query = query.where(ops.c.tenant == tenant)
        async with self.engine.connect() as conn:
            return [self._record(row) for row in (await conn.execute(query)).all()]

    # -- writing -----------------------------------------------------------

    async def prepare(
        self,
        tenant: str,
        idempotency_key: str,
        op_type: str,
        request_hash: str,
        *,
        scope: str | None = None,
        attempt: int = 0,
    ) -> tuple[OperationRecord, bool]:
        """Create the record in ``prepared`` state, or return the existing one.

        Returns:
            The record and whether this call created it.

        Raises:
            IdempotencyConflict: The key exists with a different request hash or operation type.
        """
        now = self.clock()
        values = {
            "tenant": tenant, "idempotency_key": idempotency_key, "scope": scope or idempotency_key,
            "attempt": attempt, "op_type": op_type, "request_hash": request_hash, "status": S.PREPARED.value,
            "result": None, "error": None, "version": 1, "created_at": now, "updated_at": now,
        }
        try:
            async with self.engine.begin() as conn:
                await conn.execute(self.tables.operations.insert().values(**values))
        except IntegrityError:
            existing = await self.get(tenant, idempotency_key)
            if existing is None:  # pragma: no cover - a row that vanished: keys are never deleted
                raise
            if existing.request_hash != request_hash or existing.op_type != op_type:
                raise IdempotencyConflict(
                    f"idempotency key {idempotency_key!r} of tenant {tenant!r} was used for a different request "
                    f"({existing.op_type} {existing.request_hash[:12]}); refusing {op_type} {request_hash[:12]}"
                ) from None
            return existing, False
        return self._record_from_values(values), True

    def _record_from_values(self, values: dict[str, Any]) -> OperationRecord:
        return OperationRecord(**{**values, "status": OperationStatus(values["status"]),
                                  "result": _loads(values["result"])})

    async def transition(
        self,
        record: OperationRecord,
        status: OperationStatus,
        *,
        result: Any = None,
        error: str | None = None,
    ) -> OperationRecord:
        """Move a record to ``status`` with compare-and-set on its version.

        Re-observing the current state is a no-op that returns the stored
        record. If the stored record moved on since ``record`` was read, the
        transition is re-checked against the stored state.

        Raises:
            InvalidTransition: Not allowed from the stored state.
            ConcurrentUpdate: Lost the race too many times.
        """
        for _ in range(5):
            if not check_transition(record.status, status):
                return record
            now = self.clock()
            ops = self.tables.operations
            new_version = record.version + 1
            async with self.engine.begin() as conn:
                changed = await conn.execute(
                    update(ops)
                    .where(and_(ops.c.tenant == record.tenant, ops.c.idempotency_key == record.idempotency_key,
                                ops.c.version == record.version))
                    .values(status=status.value, result=_dumps(result), error=error, version=new_version,
                            updated_at=now)
                )
                if changed.rowcount == 1:
                    updated = replace(record, status=status, result=result, error=error, version=new_version,
                                      updated_at=now)
                    if status in _EVENT_STATES:
                        await self._write_event(conn, updated, now)
                    return updated
            stored = await self.get(record.tenant, record.idempotency_key)
            if stored is None:
                raise ConcurrentUpdate(f"operation {record.idempotency_key!r} disappeared")
            record = stored
        raise ConcurrentUpdate(f"operation {record.idempotency_key!r} kept changing; gave up after 5 attempts")

    async def _write_event(self, conn: AsyncConnection, record: OperationRecord, now: float) -> None:
        payload = {
            "tenant": record.tenant, "idempotency_key": record.idempotency_key, "op_type": record.op_type,
            "status": record.status.value, "result": record.result, "error": record.error,
            "version": record.version, "attempt": record.attempt, "scope": record.scope,
        }
        await conn.execute(self.tables.outbox.insert().values(
            event_id=str(uuid.uuid4()), seq=record.version, tenant=record.tenant,
            idempotency_key=record.idempotency_key, event_type=f"operation.{record.status.value}",
            payload=json.dumps(payload, default=str, sort_keys=True), created_at=now, published_at=None,
            attempts=0, last_error=None,
        ))

    async def append_event(self, tenant: str, idempotency_key: str, event_type: str, payload: dict[str, Any]) -> bool:
        """Put an event with no operation behind it (a grader alert) in the outbox, once per key.

        The outbox's publishers deliver it like any other event, so it survives
        a crash of the process that appended it.

        Returns:
            ``True`` if appended, ``False`` if an event with this key was already there.
        """
        try:
            async with self.engine.begin() as conn:
                await conn.execute(self.tables.outbox.insert().values(
                    event_id=str(uuid.uuid4()), seq=1, tenant=tenant, idempotency_key=idempotency_key,
                    event_type=event_type, payload=json.dumps(payload, default=str, sort_keys=True),
                    created_at=self.clock(), published_at=None, attempts=0, last_error=None,
                ))
        except IntegrityError:
            return False
        return True

    async def execute(
        self,
        record: OperationRecord,
        operation: Callable[[], Awaitable[Any]],
        *,
        timeout_secs: float | None = None,
        is_failure: Callable[[Any], bool] | None = None,
    ) -> OperationRecord:
        """Claim a ``prepared`` record, run ``operation`` once and store its outcome.

        An exception is ``failed``; running past ``timeout_secs`` or being
        cancelled is ``outcome_unknown`` (the operation may have taken effect).

        Returns:
            The record in its new state. If another worker claimed the record
            first, the stored record is returned and ``operation`` is not run.
        """
        claimed = await self.claim(record)
        if claimed is None:
            stored = await self.get(record.tenant, record.idempotency_key)
            return stored or record
        try:
            result = await asyncio.wait_for(operation(), timeout_secs)
        except TimeoutError:
            return await self.transition(claimed, S.OUTCOME_UNKNOWN, error=f"no reply within {timeout_secs:g}s")
        except asyncio.CancelledError:
            await asyncio.shield(self.transition(claimed, S.OUTCOME_UNKNOWN, error="cancelled while executing"))
            raise
        except Exception as exc:
            return await self.transition(claimed, S.FAILED, error=f"{type(exc).__name__}: {exc}")
        if is_failure is not None and is_failure(result):
            return await self.transition(claimed, S.FAILED, result=result, error="the operation reported an error")
        return await self.transition(claimed, S.SUCCEEDED, result=result)

    async def claim(self, record: OperationRecord) -> OperationRecord | None:
        """Move a ``prepared`` record to ``executing`` if nobody else did.

        Returns:
            The claimed record, or ``None`` when the record is not ``prepared``
            at ``record.version`` any more (another worker owns it).
        """
        if record.status != S.PREPARED:
            return None
        ops = self.tables.operations
        now = self.clock()
        async with self.engine.begin() as conn:
            changed = await conn.execute(
                update(ops)
                .where(and_(ops.c.tenant == record.tenant, ops.c.idempotency_key == record.idempotency_key,
                            ops.c.version == record.version, ops.c.status == S.PREPARED.value))
                .values(status=S.EXECUTING.value, version=record.version + 1, updated_at=now)
            )
        if changed.rowcount != 1:
            return None
        return replace(record, status=S.EXECUTING, version=record.version + 1, updated_at=now)

    async def cancel(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Cancel a ``prepared`` record (it will never execute)."""
        return await self.transition(record, S.CANCELLED, error=reason)

    async def mark_unknown(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Record that an ``executing`` operation's outcome is unknown (e.g. its process died)."""
        return await self.transition(record, S.OUTCOME_UNKNOWN, error=reason)

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler) -> OperationRecord:
        """Ask the backend for the real outcome of an ``outcome_unknown`` record.

        Returns:
            The record, settled if the backend could tell, otherwise unchanged.

        Raises:
            InvalidTransition: The record is not ``outcome_unknown`` and the
                backend's answer contradicts its state.
        """
        if record.status != S.OUTCOME_UNKNOWN:
            return record
        answer = await reconciler(record)
        if answer is None:
            return record
        if answer.status not in (S.SUCCEEDED, S.FAILED):
            raise InvalidTransition(f"reconciliation must settle to succeeded or failed, not {answer.status}")
        return await self.transition(record, answer.status, result=answer.result,
                                     error=answer.error or (record.error if answer.status == S.FAILED else None))
