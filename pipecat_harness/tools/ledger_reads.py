"""Reading the operation ledger: one record, records in a state, a call's succeeded operations."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pipecat_harness.tools.operation_state import OperationRecord, OperationStatus
from pipecat_harness.tools.storage import LedgerTables

__all__ = ["LedgerReads"]


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class LedgerReads:
    """The read side of :class:`~pipecat_harness.tools.ledger.OperationLedger`."""

    engine: AsyncEngine
    tables: LedgerTables

    def _record(self, row: Any) -> OperationRecord:
        m = row._mapping
        return OperationRecord(
            tenant=m["tenant"], idempotency_key=m["idempotency_key"], op_type=m["op_type"],
            request_hash=m["request_hash"], status=OperationStatus(m["status"]), result=_loads(m["result"]),
            error=m["error"], version=m["version"], scope=m["scope"], attempt=m["attempt"],
            created_at=m["created_at"], updated_at=m["updated_at"], owner=m["owner"] or "",
            lease_until=m["lease_until"] or 0.0, resource=m["resource"] or "",
        )

    async def get(self, tenant: str, idempotency_key: str) -> OperationRecord | None:
        """Return the record for a key, or ``None``."""
        ops = self.tables.operations
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                select(ops).where(and_(ops.c.tenant == tenant, ops.c.idempotency_key == idempotency_key))
            )).first()
        return self._record(row) if row is not None else None

    async def find(
        self, tenant: str | None, status: OperationStatus, *, op_type: str | None = None,
        request_hash: str | None = None, scope_prefix: str | None = None, resource: str | None = None,
    ) -> list[OperationRecord]:
        """Return the records in one state (of one tenant, request or call scope), oldest first."""
        ops = self.tables.operations
        condition = ops.c.status == status.value
        if tenant is not None:
            condition = and_(condition, ops.c.tenant == tenant)
        if resource is not None:
            condition = and_(condition, ops.c.resource == resource)
        if scope_prefix is not None:
            condition = and_(condition, ops.c.scope.startswith(scope_prefix, autoescape=True))
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
