"""``OperationLedger``: one record per write, with idempotency and an exact state machine.

States and the only transitions allowed::

    prepared ──► executing ──► succeeded | failed | outcome_unknown
    prepared ──► cancelled
    outcome_unknown ──► succeeded | failed        (reconciliation)
    failed | cancelled ──► executing              (a new attempt, same key)

Observing the state a record is already in again is allowed and changes
nothing; any other transition raises :class:`InvalidTransition`. Every change
is a compare-and-set on the record's version, and every change into a
terminal or unknown state writes its completion event to the outbox in the
same transaction.

One record per logical operation: its key never changes, whatever the number
of attempts. A timeout or an exception is ``outcome_unknown``: the write may
have happened, so it is never retried blindly. :meth:`OperationLedger.reconcile`
asks the business backend for the real outcome, and honours the owner's lease
(see :mod:`pipecat_harness.tools.owners`); :meth:`OperationLedger.recover`
turns records a dead owner left ``executing`` into ``outcome_unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

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

__all__ = [
    "TRANSITIONS",
    "ConcurrentUpdate",
    "IdempotencyConflict",
    "InvalidTransition",
    "LedgerError",
    "OperationLedger",
    "OperationRecord",
    "OperationRefused",
    "OperationStatus",
    "Reconciler",
    "Reconciliation",
    "check_transition",
]


S = OperationStatus
_EVENT_STATES = frozenset({S.SUCCEEDED, S.FAILED, S.OUTCOME_UNKNOWN, S.CANCELLED})
_ENCODER = json.JSONEncoder(default=str, sort_keys=True)  # built once: json.dumps with options builds one per call


def _dumps(value: Any) -> str | None:
    return None if value is None else _ENCODER.encode(value)


class OperationLedger(LedgerRecovery):
    """Operation records and their outbox, on SQLite or PostgreSQL.

    Args:
        engine: An async SQLAlchemy engine, or a URL (``sqlite+aiosqlite:///ledger.db``,
            ``postgresql+asyncpg://user@host/db``). Defaults to in-memory SQLite.
        table_prefix: Prefix of the table names.
    """

    def __init__(self, engine: AsyncEngine | str = DEFAULT_LEDGER_URL, *, table_prefix: str = "harness_") -> None:
        self._url = engine if isinstance(engine, str) else None
        self.tables: LedgerTables = ledger_tables(table_prefix)
        self._shared = acquire_engine(engine) if isinstance(engine, str) else shared_engine_for(engine)
        self.engine: AsyncEngine = self._shared.engine
        self.store: LedgerStore = self._shared.store
        self.table_prefix = table_prefix
        self._closed = False

    def begin(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction on the ledger's database (serialised in the process on SQLite).

        Never open another write transaction while holding one.
        """
        return self._shared.begin()

    async def create_tables(self) -> None:
        """Create the tables, or bring existing ones to the current layout (once per engine and prefix).

        Existing records are kept; see :mod:`pipecat_harness.tools.migrations`.

        Raises:
            SchemaTooNew: The tables were written by a newer harness version.
        """
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
        if self._url is not None:
            await release_engine(self._url, self._shared)
        else:
            await self.store.close()

    # -- writing -----------------------------------------------------------

    def _values(self, tenant: str, idempotency_key: str, op_type: str, request_hash: str, scope: str | None,
                status: OperationStatus, attempt: int, owner: str, lease_until: float,
                resource: str = "") -> dict[str, Any]:
        now = self.clock()
        return {
            "tenant": tenant, "idempotency_key": idempotency_key, "scope": scope or idempotency_key,
            "attempt": attempt, "op_type": op_type, "request_hash": request_hash, "status": status.value,
            "result": None, "error": None, "version": 1, "created_at": now, "updated_at": now,
            "owner": owner, "lease_until": lease_until, "resource": resource,
        }

    def _insert(self, values: dict[str, Any]) -> asyncio.Future[tuple[OperationRecord, bool]]:
        """The insert, begun at once; its future is resolved when it has run, whoever still waits for it."""
        answer: asyncio.Future[tuple[OperationRecord, bool]] = asyncio.get_running_loop().create_future()

        def answered(inserted: asyncio.Future[Any]) -> None:
            try:
                if not answer.done():  # else an awaiting task was cancelled; the insert ran (or not) all the same
                    answer.set_result(insert_answer(values, inserted.result()))
            except (Exception, asyncio.CancelledError) as exc:
                answer.set_exception(exc)
        self.store.insert_soon(self.table_prefix, values).add_done_callback(answered)
        return answer

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
        return await self._insert(self._values(tenant, idempotency_key, op_type, request_hash, scope, S.PREPARED,
                                               attempt, "", 0.0))

    def start(
        self,
        tenant: str,
        idempotency_key: str,
        op_type: str,
        request_hash: str,
        *,
        scope: str | None = None,
        owner: str = "",
        lease_until: float = 0.0,
        resource: str = "",
    ) -> asyncio.Future[tuple[OperationRecord, bool]]:
        """Create the record directly in ``executing`` state, owned by ``owner``, or return the existing one.

        One transaction for a new operation; when the key exists the stored
        record is returned untouched and the caller decides (see :meth:`claim`).
        Begun at once: the future is resolved when the insert has run, waited for or not, so a caller that stops
        waiting still learns whether it created the record.

        Raises:
            IdempotencyConflict: The key exists with a different request hash or operation type.
        """
        return self._insert(self._values(tenant, idempotency_key, op_type, request_hash, scope, S.EXECUTING,
                                         1, owner, lease_until, resource))

    async def transition(
        self,
        record: OperationRecord,
        status: OperationStatus,
        *,
        result: Any = None,
        error: str | None = None,
        lease_until: float = 0.0,
    ) -> OperationRecord:
        """Move a record to ``status`` with compare-and-set on its version.

        Re-observing the current state is a no-op that returns the stored
        record. If the stored record moved on since ``record`` was read, the
        transition is re-checked against the stored state.

        Args:
            record: The record as last read.
            status: The new state.
            result: The handler's result.
            error: Why it failed or is unknown.
            lease_until: The owner's lease after the change (0: no handler runs).

        Raises:
            InvalidTransition: Not allowed from the stored state.
            ConcurrentUpdate: Lost the race too many times.
        """
        for _ in range(5):
            if not check_transition(record.status, status):
                return record
            now = self.clock()
            new_version = record.version + 1
            updated = record.changed(status=status, result=result, error=error, version=new_version,
                              updated_at=now, lease_until=float(lease_until))
            changed = await self.store.update(
                self.table_prefix, self._this(record),
                {"status": status.value, "result": _dumps(result), "error": error, "version": new_version,
                 "updated_at": now, "lease_until": float(lease_until)},
                self._event(updated, now) if status in _EVENT_STATES else None,
            )
            if changed:
                return updated
            stored = await self.get(record.tenant, record.idempotency_key)
            if stored is None:
                raise ConcurrentUpdate(f"operation {record.idempotency_key!r} disappeared")
            if stored.attempt != record.attempt:
                # Evidence about an earlier attempt (fenced off when the next one
                # started) never touches the current attempt.
                return stored
            record = stored
        raise ConcurrentUpdate(f"operation {record.idempotency_key!r} kept changing; gave up after 5 attempts")

    async def settle(
        self,
        record: OperationRecord,
        status: OperationStatus,
        *,
        result: Any = None,
        error: str | None = None,
        lease_until: float = 0.0,
    ) -> OperationRecord:
        """Like :meth:`transition`, but a state that no longer permits the change returns the stored record.

        Used for evidence that may arrive after someone else settled the
        operation (a late reply, a second process): the first settlement wins.
        """
        try:
            return await self.transition(record, status, result=result, error=error, lease_until=lease_until)
        except InvalidTransition:
            return await self.get(record.tenant, record.idempotency_key) or record

    @staticmethod
    def _this(record: OperationRecord) -> list[tuple[str, str, Any]]:
        """The record's row, if it is still at the version ``record`` was read at (compare-and-set)."""
        return [("tenant", "=", record.tenant), ("idempotency_key", "=", record.idempotency_key),
                ("version", "=", record.version)]

    @staticmethod
    def _event(record: OperationRecord, now: float) -> dict[str, Any]:
        """The outbox row announcing the record's new state."""
        payload = {
            "tenant": record.tenant, "idempotency_key": record.idempotency_key, "op_type": record.op_type,
            "status": record.status.value, "result": record.result, "error": record.error,
            "version": record.version, "attempt": record.attempt, "scope": record.scope,
        }
        return {
            "event_id": str(uuid.uuid4()), "seq": record.version, "tenant": record.tenant,
            "idempotency_key": record.idempotency_key, "event_type": f"operation.{record.status.value}",
            "payload": _ENCODER.encode(payload), "created_at": now, "published_at": None,
            "attempts": 0, "last_error": None, "claimed_by": None, "claimed_until": 0.0,
        }

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

        Raising :class:`OperationRefused` (or returning a result ``is_failure``
        accepts) is ``failed``; any other exception, running past
        ``timeout_secs`` or being cancelled is ``outcome_unknown`` (the
        operation may have taken effect).

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
        """Start a new attempt of a record that permits one (prepared, failed or cancelled).

        Returns:
            The record, ``executing`` under ``owner``, or ``None`` when the
            record is not at ``record.version`` in such a state any more
            (another worker owns it).
        """
        if not record.retryable:
            return None
        now = self.clock()
        changed = await self.store.update(
            self.table_prefix, [*self._this(record), ("status", "=", record.status.value)],
            {"status": S.EXECUTING.value, "version": record.version + 1, "updated_at": now,
             "attempt": record.attempt + 1, "owner": owner, "lease_until": float(lease_until)},
        )
        if not changed:
            return None
        return record.changed(status=S.EXECUTING, version=record.version + 1, updated_at=now,
                       attempt=record.attempt + 1, owner=owner, lease_until=float(lease_until))

    async def release(self, record: OperationRecord) -> None:
        """End ``record.owner``'s lease: its handler is no longer running (it was cancelled)."""
        await self.store.update(
            self.table_prefix,
            [("tenant", "=", record.tenant), ("idempotency_key", "=", record.idempotency_key),
             ("owner", "=", record.owner), ("status", "<>", S.EXECUTING.value)],
            {"lease_until": 0.0},
        )

    async def cancel(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Cancel a ``prepared`` record (it will never execute)."""
        return await self.transition(record, S.CANCELLED, error=reason)
