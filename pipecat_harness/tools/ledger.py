"""``OperationLedger``: one record per write, with idempotency and the state machine of ``operation_state``.

Every change is a compare-and-set on the record's version; a change into a terminal or unknown state writes its
outbox event in the same transaction. An unknown outcome is never retried blindly, but reconciled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pipecat_harness.tools.engines import acquire_engine, release_engine, shared_engine_for
from pipecat_harness.tools.ledger_reads import insert_answer
from pipecat_harness.tools.ledger_recovery import LedgerRecovery
from pipecat_harness.tools.ledger_store import LedgerStore
from pipecat_harness.tools.migrations import migrate, schema_table
from pipecat_harness.tools.operation_state import (
    TRANSITIONS,
    ConcurrentUpdate,
    IdempotencyConflict,
    InvalidTransition,
    LedgerError,
    OperationRecord,
    OperationRefused,
    OperationStatus,
    Reconciler,
    Reconciliation,
    check_transition,
)
from pipecat_harness.tools.storage import DEFAULT_LEDGER_URL, LedgerTables, ledger_tables

if TYPE_CHECKING:
    from pipecat_harness.tools.operations import OperationStore

__all__ = ["TRANSITIONS", "ConcurrentUpdate", "IdempotencyConflict", "InvalidTransition", "LedgerError",
           "LedgerOperations", "OperationLedger", "OperationRecord", "OperationRefused", "OperationStatus",
           "Reconciler", "Reconciliation", "check_transition"]

S = OperationStatus
_EVENT_STATES = frozenset({S.SUCCEEDED, S.FAILED, S.OUTCOME_UNKNOWN, S.CANCELLED})
_EVENT_FIELDS = ("tenant", "idempotency_key", "op_type", "status", "result", "error", "version", "attempt", "scope")
_UNPUBLISHED = {"published_at": None, "attempts": 0, "last_error": None, "claimed_by": None, "claimed_until": 0.0}
_ENCODER = json.JSONEncoder(default=str, sort_keys=True)  # built once: json.dumps with options builds one per call


def _outbox_row(tenant: str, key: str, seq: int, event_type: str, payload: str, now: float) -> dict[str, Any]:
    row = {"event_id": str(uuid.uuid4()), "seq": seq, "tenant": tenant, "idempotency_key": key}
    return {**row, "event_type": event_type, "payload": payload, "created_at": now, **_UNPUBLISHED}


def _key_of(record: OperationRecord) -> list[tuple[str, str, Any]]:
    return [("tenant", "=", record.tenant), ("idempotency_key", "=", record.idempotency_key)]


class OperationLedger(LedgerRecovery):
    """Operation records and their outbox, on SQLite or PostgreSQL (an engine or a URL; default: in-memory SQLite)."""

    def __init__(self, engine: AsyncEngine | str = DEFAULT_LEDGER_URL, *, table_prefix: str = "harness_") -> None:
        self._url = engine if isinstance(engine, str) else None
        self.tables: LedgerTables = ledger_tables(table_prefix)
        self._shared = acquire_engine(engine) if isinstance(engine, str) else shared_engine_for(engine)
        self.engine: AsyncEngine = self._shared.engine
        self.store: LedgerStore = self._shared.store
        self.table_prefix = table_prefix
        self._closed = False

    def operations(self, tenant: str) -> LedgerOperations:
        """The records of ``tenant``, as the gate uses them."""
        return LedgerOperations(self, tenant)

    def begin(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction (serialised in the process on SQLite); never open another while holding one."""
        return self._shared.begin()

    async def create_tables(self) -> None:
        """Create the tables, or bring existing ones to the current layout (``SchemaTooNew`` if newer)."""
        await self.sync_clock()
        if self.table_prefix in self._shared.created:
            return
        for attempt in range(3):
            try:
                async with self.begin() as conn:
                    await conn.run_sync(migrate, self.tables, self.table_prefix, self.clock())
                break
            except DBAPIError:  # another process created or migrated the same tables at the same moment
                if attempt == 2:
                    raise
        self._shared.created.add(self.table_prefix)

    async def drop_tables(self) -> None:
        """Drop the tables (tests and benchmarks)."""
        async with self.begin() as conn:
            await conn.run_sync(self.tables.metadata.drop_all)
            await conn.run_sync(schema_table(self.table_prefix).drop, checkfirst=True)
        self._shared.created.discard(self.table_prefix)

    async def close(self) -> None:
        """Release the shared engine (disposed of with its last user); a given engine stays the caller's."""
        if self._closed:
            return
        self._closed = True
        await (release_engine(self._url, self._shared) if self._url is not None else self.store.close())

    def _insert(self, tenant: str, key: str, op_type: str, request_hash: str, scope: str | None,
                **state: Any) -> asyncio.Future[tuple[OperationRecord, bool]]:
        """Insert a record (``prepared``, unless ``state`` says otherwise), begun at once, resolved when it ran."""
        now = self.clock()
        values = {"tenant": tenant, "idempotency_key": key, "scope": scope or key, "attempt": 0, "op_type": op_type,
                  "request_hash": request_hash, "status": S.PREPARED.value, "result": None, "error": None, "version": 1,
                  "created_at": now, "updated_at": now, "owner": "", "lease_until": 0.0, "resource": "", **state}
        answer: asyncio.Future[tuple[OperationRecord, bool]] = asyncio.get_running_loop().create_future()

        def answered(inserted: asyncio.Future[Any]) -> None:
            try:
                if not answer.done():  # else an awaiting task was cancelled; the insert ran (or not) all the same
                    answer.set_result(insert_answer(values, inserted.result()))
            except (Exception, asyncio.CancelledError) as exc:
                answer.set_exception(exc)

        self.store.insert_soon(self.table_prefix, values).add_done_callback(answered)
        return answer

    async def prepare(self, tenant: str, idempotency_key: str, op_type: str, request_hash: str, *,
                      scope: str | None = None, attempt: int = 0) -> tuple[OperationRecord, bool]:
        """Create the record ``prepared``, or return the stored one (``IdempotencyConflict`` if of another request)."""
        return await self._insert(tenant, idempotency_key, op_type, request_hash, scope, attempt=attempt)

    def start(self, tenant: str, idempotency_key: str, op_type: str, request_hash: str, *, scope: str | None = None,
              owner: str = "", lease_until: float = 0.0,
              resource: str = "") -> asyncio.Future[tuple[OperationRecord, bool]]:
        """Create the record ``executing`` under ``owner``, or return the stored one untouched (see :meth:`claim`).

        Begun at once and resolved when the insert ran, so a caller that stops waiting still learns if it created it.
        """
        state = {"status": S.EXECUTING.value, "attempt": 1, "owner": owner, "lease_until": lease_until}
        return self._insert(tenant, idempotency_key, op_type, request_hash, scope, resource=resource, **state)

    async def transition(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                         error: str | None = None, lease_until: float = 0.0) -> OperationRecord:
        """Move a record to ``status`` by compare-and-set on its version (``lease_until``: 0 when no handler runs).

        Re-observing the state changes nothing; a record that moved on is re-checked as stored (``InvalidTransition``;
        ``ConcurrentUpdate`` after losing five races).
        """
        encoded = None if result is None else _ENCODER.encode(result)
        for _ in range(5):
            if not check_transition(record.status, status):
                return record
            now = self.clock()
            changes = dict(status=status.value, result=encoded, error=error, version=record.version + 1, updated_at=now)
            changes["lease_until"] = float(lease_until)
            updated = record.changed(**{**changes, "status": status, "result": result})
            event = self._event(updated, now) if status in _EVENT_STATES else None
            if await self.store.update(self.table_prefix, self._this(record), changes, event):
                return updated
            stored = await self.get(record.tenant, record.idempotency_key)
            if stored is None:
                raise ConcurrentUpdate(f"operation {record.idempotency_key!r} disappeared")
            if stored.attempt != record.attempt:  # evidence about an earlier, fenced-off attempt changes nothing
                return stored
            record = stored
        raise ConcurrentUpdate(f"operation {record.idempotency_key!r} kept changing; gave up after 5 attempts")

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None, lease_until: float = 0.0) -> OperationRecord:
        """As :meth:`transition`, but a state no longer permitting it returns the stored record: the first one wins."""
        try:
            return await self.transition(record, status, result=result, error=error, lease_until=lease_until)
        except InvalidTransition:
            return await self.get(record.tenant, record.idempotency_key) or record

    @staticmethod
    def _this(record: OperationRecord) -> list[tuple[str, str, Any]]:
        """The record's row, if it is still at the version ``record`` was read at (compare-and-set)."""
        return [*_key_of(record), ("version", "=", record.version)]

    @staticmethod
    def _event(record: OperationRecord, now: float) -> dict[str, Any]:
        """The outbox row announcing the record's new state."""
        payload = _ENCODER.encode({field: getattr(record, field) for field in _EVENT_FIELDS})
        event_type = f"operation.{record.status.value}"
        return _outbox_row(record.tenant, record.idempotency_key, record.version, event_type, payload, now)

    async def append_event(self, tenant: str, idempotency_key: str, event_type: str, payload: dict[str, Any]) -> bool:
        """Put an event of no operation (a grader alert) in the outbox, once per key (``False``: it was there)."""
        row = _outbox_row(tenant, idempotency_key, 1, event_type, _ENCODER.encode(payload), self.clock())
        try:
            async with self.engine.begin() as conn:
                await conn.execute(self.tables.outbox.insert().values(row))
        except IntegrityError:
            return False
        return True

    async def execute(self, record: OperationRecord, operation: Callable[[], Awaitable[Any]], *,
                      timeout_secs: float | None = None,
                      is_failure: Callable[[Any], bool] | None = None) -> OperationRecord:
        """Claim a ``prepared`` record, run ``operation`` once and return the record with its outcome.

        ``OperationRefused`` (or a result ``is_failure`` accepts) is ``failed``; any other exception, a timeout or a
        cancellation is ``outcome_unknown``. A record another worker claimed first is returned as stored, not run.
        """
        claimed = await self.claim(record)
        if claimed is None:
            return await self.get(record.tenant, record.idempotency_key) or record
        try:
            result = await asyncio.wait_for(operation(), timeout_secs)
        except TimeoutError:
            return await self.settle(claimed, S.OUTCOME_UNKNOWN, error=f"no reply within {timeout_secs:g}s")
        except asyncio.CancelledError:
            await asyncio.shield(self.settle(claimed, S.OUTCOME_UNKNOWN, error="cancelled while executing"))
            raise
        except OperationRefused as exc:
            return await self.settle(claimed, S.FAILED, error=f"refused: {exc}")
        except Exception as exc:
            return await self.settle(claimed, S.OUTCOME_UNKNOWN, error=f"{type(exc).__name__}: {exc}")
        if is_failure is not None and is_failure(result):
            return await self.settle(claimed, S.FAILED, result=result, error="the operation reported an error")
        return await self.settle(claimed, S.SUCCEEDED, result=result)

    async def claim(self, record: OperationRecord, *, owner: str = "",
                    lease_until: float = 0.0) -> OperationRecord | None:
        """Start a new attempt of a prepared, failed or cancelled record; ``None`` if another worker changed it."""
        if not record.retryable:
            return None
        changes = {"version": record.version + 1, "updated_at": self.clock(), "attempt": record.attempt + 1,
                   "owner": owner, "lease_until": float(lease_until)}
        where = [*self._this(record), ("status", "=", record.status.value)]
        if not await self.store.update(self.table_prefix, where, {"status": S.EXECUTING.value, **changes}):
            return None
        return record.changed(status=S.EXECUTING, **changes)

    async def release(self, record: OperationRecord) -> None:
        """End ``record.owner``'s lease: its handler is no longer running (it was cancelled)."""
        where = [*_key_of(record), ("owner", "=", record.owner), ("status", "<>", S.EXECUTING.value)]
        await self.store.update(self.table_prefix, where, {"lease_until": 0.0})

    async def cancel(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Cancel a ``prepared`` record (it will never execute)."""
        return await self.transition(record, S.CANCELLED, error=reason)


class LedgerOperations:
    """Operations recorded in an :class:`OperationLedger` (survive restarts, shared by processes)."""

    inline = False

    def __init__(self, ledger: OperationLedger, tenant: str) -> None:
        self.ledger: OperationStore | None = ledger
        self._ledger = ledger
        self.tenant = tenant

    def now(self) -> float:
        """See :class:`Operations`."""
        return self._ledger.clock()

    async def get(self, key: str) -> OperationRecord | None:
        """See :class:`Operations`."""
        return await self._ledger.get(self.tenant, key)

    async def release(self, record: OperationRecord) -> None:
        """See :class:`Operations`."""
        await self._ledger.release(record)

    def start(self, key: str, op_type: str, request_hash: str, scope: str, owner: str,
              lease_until: float, resource: str = "") -> Awaitable[tuple[OperationRecord, bool]]:
        """See :class:`Operations` (the ledger's future)."""
        return self._ledger.start(self.tenant, key, op_type, request_hash, scope=scope, owner=owner,
                                  lease_until=lease_until, resource=resource)

    async def claim(self, record: OperationRecord, owner: str, lease_until: float) -> OperationRecord | None:
        """See :class:`Operations`."""
        return await self._ledger.claim(record, owner=owner, lease_until=lease_until)

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None, lease_until: float = 0.0) -> OperationRecord:
        """See :class:`Operations`."""
        return await self._ledger.settle(record, status, result=result, error=error, lease_until=lease_until)

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler,
                        grace_secs: float = 0.0) -> OperationRecord:
        """See :class:`Operations`."""
        current = await self._ledger.get(record.tenant, record.idempotency_key) or record
        return await self._ledger.reconcile(current, reconciler, grace_secs)

    async def recover(self, scope_prefix: str, grace_secs: float = 0.0) -> list[OperationRecord]:
        """See :class:`Operations`."""
        return await self._ledger.recover(self.tenant, scope_prefix=scope_prefix, grace_secs=grace_secs)

    async def unknown(self, scope_prefix: str) -> list[OperationRecord]:
        """See :class:`Operations`."""
        return await self._ledger.find(self.tenant, S.OUTCOME_UNKNOWN, scope_prefix=scope_prefix)

    async def unsettled_on(self, scope_prefix: str, resource: str) -> list[OperationRecord]:
        """See :class:`Operations`."""
        return [record for status in (S.EXECUTING, S.OUTCOME_UNKNOWN) for record in
                await self._ledger.find(self.tenant, status, scope_prefix=scope_prefix, resource=resource)]
