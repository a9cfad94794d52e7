"""Recovering the ledger: records a gone owner left executing, and reconciliation of unknown outcomes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pipecat_harness.tools.ledger_reads import LedgerReads
from pipecat_harness.tools.operation_state import (
    InvalidTransition,
    OperationRecord,
    OperationStatus,
    Reconciler,
    unfenced,
)
from pipecat_harness.tools.owners import handler_may_run

__all__ = ["LedgerRecovery"]

S = OperationStatus


class LedgerRecovery(LedgerReads):
    """Recovery and reconciliation of :class:`~pipecat_harness.tools.ledger.OperationLedger`."""

    settle: Callable[..., Awaitable[OperationRecord]]
    """Record an outcome (implemented by the ledger)."""

    async def mark_unknown(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Record that an ``executing`` operation's outcome is unknown (e.g. its process died)."""
        return await self.settle(record, S.OUTCOME_UNKNOWN, error=reason, lease_until=record.lease_until)

    async def recover(self, tenant: str | None = None, *, scope_prefix: str | None = None,
                      grace_secs: float = 0.0) -> list[OperationRecord]:
        """Turn records a gone owner (or lapsed lease) left ``executing`` into ``outcome_unknown`` (run it often)."""
        moved, stopped = [], "its owner stopped while it was executing"
        for record in await self.find(tenant, S.EXECUTING, scope_prefix=scope_prefix):
            if not handler_may_run(record, self.clock(), grace_secs):
                moved.append(await self.settle(record, S.OUTCOME_UNKNOWN, error=stopped))
        return moved

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler,
                        grace_secs: float = 0.0) -> OperationRecord:
        """Ask the backend for the real outcome of an ``outcome_unknown`` record; return it, settled if it could tell.

        ``succeeded`` applies at once; ``failed`` only for the attempt the backend voided, once no handler of it is
        known to run (lease ended, or owner gone for ``grace_secs``). An answer of another state: ``InvalidTransition``.
        """
        if record.status != S.OUTCOME_UNKNOWN:
            return record
        answer = await reconciler(record)
        if answer is None:
            return record
        if answer.status not in (S.SUCCEEDED, S.FAILED):
            raise InvalidTransition(f"reconciliation must settle to succeeded or failed, not {answer.status}")
        if not answer.fences(record):
            unfenced(record, answer)
            return record
        if answer.status == S.FAILED and handler_may_run(record, self.clock(), grace_secs):
            return record
        error = answer.error or (record.error if answer.status == S.FAILED else None)
        return await self.settle(record, answer.status, result=answer.result, error=error)
