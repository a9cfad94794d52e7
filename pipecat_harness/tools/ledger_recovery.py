"""Recovering the ledger: records a gone owner left executing, and reconciliation of unknown outcomes."""

from __future__ import annotations

from typing import Any

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

    async def settle(self, record: OperationRecord, status: OperationStatus, *, result: Any = None,
                     error: str | None = None, lease_until: float = 0.0) -> OperationRecord:
        """Record an outcome (implemented by the ledger)."""
        raise NotImplementedError

    async def mark_unknown(self, record: OperationRecord, reason: str) -> OperationRecord:
        """Record that an ``executing`` operation's outcome is unknown (e.g. its process died)."""
        return await self.settle(record, S.OUTCOME_UNKNOWN, error=reason, lease_until=record.lease_until)

    async def recover(self, tenant: str | None = None, *, scope_prefix: str | None = None,
                      grace_secs: float = 0.0) -> list[OperationRecord]:
        """Turn records left ``executing`` by an owner that is gone (or whose lease ran out) into ``outcome_unknown``.

        Run on start-up and periodically; the records returned still need
        reconciliation (:meth:`reconcile`).

        Args:
            tenant: Only this tenant's records.
            scope_prefix: Only records of this call.
            grace_secs: How long past a dead owner's death its request may still land (its timeout).

        Returns:
            The records moved to ``outcome_unknown``.
        """
        moved = []
        for record in await self.find(tenant, S.EXECUTING, scope_prefix=scope_prefix):
            if not handler_may_run(record, self.clock(), grace_secs):
                moved.append(await self.settle(record, S.OUTCOME_UNKNOWN,
                                               error="its owner stopped while it was executing"))
        return moved

    async def reconcile(self, record: OperationRecord, reconciler: Reconciler,
                        grace_secs: float = 0.0) -> OperationRecord:
        """Ask the backend for the real outcome of an ``outcome_unknown`` record.

        A ``succeeded`` answer is applied at once; a ``failed`` one only
        for the attempt the backend voided (``Reconciliation.voided``), so a
        request of that attempt landing later is refused by the backend, and
        only once no handler of it is known to be running (its lease ended,
        or its owner has been gone for ``grace_secs``).

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
        if not answer.fences(record):
            unfenced(record, answer)
            return record
        if answer.status == S.FAILED and handler_may_run(record, self.clock(), grace_secs):
            return record
        return await self.settle(record, answer.status, result=answer.result,
                                 error=answer.error or (record.error if answer.status == S.FAILED else None))
