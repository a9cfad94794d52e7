"""Reading the operation ledger: one record, records in a state, a call's succeeded operations."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pipecat_harness.tools.ledger_store import OP_COLUMNS, LedgerStore, Where
from pipecat_harness.tools.operation_state import IdempotencyConflict, OperationRecord, OperationStatus
from pipecat_harness.tools.storage import LedgerTables

__all__ = ["LedgerReads", "insert_answer", "record_of"]


def record_of(row: Sequence[Any]) -> OperationRecord:
    """The record of a row read in :data:`~pipecat_harness.tools.ledger_store.OP_COLUMNS` order."""
    fields = dict(zip(OP_COLUMNS, row, strict=False))
    result = fields["result"]
    fields.update(status=OperationStatus(fields["status"]), result=None if result is None else json.loads(result),
                  owner=fields["owner"] or "", lease_until=fields["lease_until"] or 0.0,
                  resource=fields["resource"] or "")
    return OperationRecord(**fields)


def insert_answer(values: dict[str, Any], row: Sequence[Any] | None) -> tuple[OperationRecord, bool]:
    """The record an insert of ``values`` leaves, and whether it created it (``row``: the one stored before, if any)."""
    if row is None:
        record = object.__new__(OperationRecord)
        record.__dict__.update(values, status=OperationStatus(values["status"]))
        return record, True
    existing = record_of(row)
    if existing.request_hash != values["request_hash"] or existing.op_type != values["op_type"]:
        raise IdempotencyConflict(f"idempotency key {values['idempotency_key']!r} of tenant {values['tenant']!r} was "
                                  f"used for a different request ({existing.op_type} {existing.request_hash[:12]}); "
                                  f"refusing {values['op_type']} {values['request_hash'][:12]}")
    return existing, False


class LedgerReads:
    """The read side of the ledger; every read also brings the database's clock, which :meth:`clock` follows.

    Leases are thus written and compared on the ledger's time, whatever this host's clock says.
    """

    engine: AsyncEngine
    tables: LedgerTables
    table_prefix: str
    store: LedgerStore
    local_clock: Callable[[], float] = time.time
    _clock_offset: float = 0.0

    def clock(self) -> float:
        """The ledger's time (epoch seconds): the database's clock as last seen, carried on by this host's."""
        return self.local_clock() + self._clock_offset

    def _saw(self, database_now: Any) -> None:
        self._clock_offset = float(database_now) - self.local_clock()

    async def sync_clock(self) -> float:
        """Read the database's clock now; return the correction applied to this host's."""
        self._saw(await self.store.now())
        return self._clock_offset

    async def get(self, tenant: str, idempotency_key: str) -> OperationRecord | None:
        """Return the record for a key, or ``None``."""
        if (row := await self.store.get(self.table_prefix, tenant, idempotency_key)) is None:
            return None
        self._saw(row[15])
        return record_of(row)

    async def _select(self, where: Where, order: str = "created_at") -> list[OperationRecord]:
        rows = await self.store.select(self.table_prefix, where, order)
        if rows:
            self._saw(rows[-1][15])
        return [record_of(row) for row in rows]

    async def find(self, tenant: str | None, status: OperationStatus, *, op_type: str | None = None,
                   request_hash: str | None = None, scope_prefix: str | None = None,
                   resource: str | None = None) -> list[OperationRecord]:
        """Return the records in one state (of one tenant, request or call scope), oldest first."""
        # Status and tenant lead, matching the (status, tenant) index: the cost follows the few records in that state.
        conditions = [("status", "=", status.value), ("tenant", "=", tenant), ("resource", "=", resource),
                      ("scope", "prefix", scope_prefix), ("op_type", "=", op_type), ("request_hash", "=", request_hash)]
        return await self._select([condition for condition in conditions if condition[2] is not None])

    async def succeeded_operations(self, call_id: str) -> list[OperationRecord]:
        """Operations of one call that succeeded, oldest first (the grader checks "your refund is done" on them)."""
        return await self.find(None, OperationStatus.SUCCEEDED, scope_prefix=f"{call_id}:")

    async def records(self, tenant: str | None = None) -> list[OperationRecord]:
        """Return every record (of one tenant), oldest first."""
        where = [("tenant", "=", tenant)] if tenant is not None else []
        return await self._select(where, "created_at, idempotency_key")
