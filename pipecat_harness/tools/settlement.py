"""What becomes of a write once its handler started: its outcome settled, late replies followed, reconciliation.

A handler past its deadline, or whose caller was cancelled, is followed until it returns (never cancelled); what
the model was told was unknown and then settled is handed over once (:meth:`Settlements.take_settled`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger

from pipecat_harness.tools.execution import HandlerOutcome, LateReplies, await_deadline
from pipecat_harness.tools.operation_state import OperationRecord, OperationRefused, OperationStatus, Reconciler
from pipecat_harness.tools.operations import Operations
from pipecat_harness.tools.result import GateResult, GateStatus
from pipecat_harness.tools.store_calls import retrying

__all__ = ["GateReporter", "Settlements", "WriteRequest"]

S = OperationStatus
_UNSETTLED = (S.EXECUTING, S.OUTCOME_UNKNOWN)
_REPORTED = "the tool reported an error"
_NOT_RECORDED = ("outcome unknown: the tool replied but the operation ledger could not record it in time; it is being "
                 "recorded and you will be told")


class GateReporter(Protocol):
    """How the write runner records decisions (implemented by the gate)."""

    def refuse(self, status: GateStatus, name: str, write: bool, evidence: dict[str, Any], kind: str, reason: str, *,
               result: Any = None, key: str | None = None) -> GateResult:
        """Record a refusal and return its result."""

    @property
    def recording(self) -> bool:
        """Whether decisions are recorded anywhere."""

    def record(self, action: str, evidence: dict[str, Any]) -> Any:
        """Record a decision."""

    def outcome(self, decision: Any, result: GateResult) -> None:
        """Attach what followed a decision."""


@dataclass
class WriteRequest:
    """One write call at the gate: the tool, its operation's key, and what its decisions are recorded with."""

    reporter: GateReporter
    name: str
    key: str
    evidence: dict[str, Any]
    warnings: tuple[str, ...] = ()
    decision: Any = None

    def refuse(self, status: GateStatus, kind: str, reason: str, result: Any = None) -> GateResult:
        """Record a refusal of this call and return its result."""
        return self.reporter.refuse(status, self.name, True, self.evidence, kind, reason, result=result, key=self.key)

    def result(self, status: GateStatus, value: Any = None, reason: str = "", kind: str = "") -> GateResult:
        """The result of this call after its handler ran."""
        return GateResult(status, self.name, value, reason, True, self.key, self.warnings, kind)


class Settlements:
    """Settles the write operations of one gate once their handlers started (the half of ``WriteRunner`` after it).

    ``timeout_secs`` bounds a handler and the gate's own ledger writes; ``definitive_errors`` mean "the backend said
    no" (besides :class:`OperationRefused`); an outcome the ledger failed to record is retried ``settle_retry_secs``.
    """

    def __init__(self, operations: Operations, reporter: GateReporter, *, timeout_secs: float | None,
                 is_failure: Callable[[Any], bool], definitive_errors: tuple[type[BaseException], ...] = (),
                 settle_retry_secs: float = 120.0) -> None:
        self.operations = operations
        self.reporter = reporter
        self.timeout_secs = timeout_secs
        self.is_failure = is_failure
        self.definitive_errors: tuple[type[BaseException], ...] = (OperationRefused, *definitive_errors)
        self.reconciler: Reconciler | None = None
        self.reconcilers: dict[str, Reconciler] = {}
        self.grace_secs = timeout_secs or 0.0  # a dead owner's request may still land for its timeout
        self.settle_retry_secs = settle_retry_secs
        self._late = LateReplies()
        self._told_unknown: set[str] = set()
        self._settled: list[OperationRecord] = []
        # Writes the model was told were unknown that then went through, by resource: a different write on
        # that resource is answered with this news first.
        self._unseen_commits: dict[str, OperationRecord] = {}

    async def _finish(self, request: WriteRequest, record: OperationRecord, task: asyncio.Future[Any],
                      ended: asyncio.Future[None]) -> GateResult:
        try:
            outcome = await await_deadline(task, self.timeout_secs, ended)
        except asyncio.CancelledError:
            # Cancelled from outside (Pipecat's own deadline, the call ending): the handler goes on, and its
            # outcome settles the operation and is told next time.
            await self._follow(record, task, "the call was cancelled while the tool ran")
            raise
        if outcome.timed_out:
            await self._follow(record, task, f"no reply within {self.timeout_secs:g}s")
            reason = f"outcome unknown: no reply within {self.timeout_secs:g}s; the action may or may not have happened"
            return self._unknown(request, "timeout", reason)
        stored = await self._record_outcome(record, outcome)
        if stored is None:
            return self._unknown(request, "store_error", _NOT_RECORDED)
        if stored.status == S.OUTCOME_UNKNOWN:  # raised after the request may have reached the backend
            stored = await self.reconcile(stored, request.evidence)
        result = self._result_of(request, stored, outcome)
        if result.status == GateStatus.OUTCOME_UNKNOWN:
            self._told_unknown.add(request.key)
        self.reporter.outcome(request.decision, result)
        return result

    def _unknown(self, request: WriteRequest, kind: str, reason: str) -> GateResult:
        result = request.result(GateStatus.OUTCOME_UNKNOWN, reason=reason, kind=kind)
        self.reporter.outcome(request.decision, result)
        self.reporter.record("outcome_unknown", {**request.evidence, "reason": reason})
        return result

    async def _record_outcome(self, record: OperationRecord, outcome: HandlerOutcome) -> OperationRecord | None:
        """Settle the handler's outcome, retried; ``None`` if not within the deadline (then retried in background)."""
        if self.operations.inline:  # an in-process store never suspends: nothing can come in between
            with contextlib.suppress(Exception):  # if it failed: retried as below
                return await self._settle_outcome(record, outcome)
        limit = asyncio.timeout(self.timeout_secs)
        try:
            async with limit:
                return await retrying(lambda: self._settle_outcome(record, outcome), within_secs=self.settle_retry_secs)
        except asyncio.CancelledError:
            self._told_unknown.add(record.idempotency_key)
            self._late.watch(self._settle_again(record, outcome))
            raise
        except Exception as exc:
            self._told_unknown.add(record.idempotency_key)
            if limit.expired():
                self._late.watch(self._settle_again(record, outcome))
            else:
                logger.warning(f"could not record the outcome of {record.idempotency_key}: {exc}")
            return None

    async def _settle_again(self, record: OperationRecord, outcome: HandlerOutcome) -> None:
        stored = await retrying(lambda: self._settle_outcome(record, outcome), within_secs=self.settle_retry_secs)
        if stored.status not in _UNSETTLED:  # a later attempt's outcome (this one voided) is the operation's too
            self._note_settled(stored, "ledger_retry")

    async def _settle_outcome(self, record: OperationRecord, outcome: HandlerOutcome) -> OperationRecord:
        if outcome.exception is not None:
            status = S.FAILED if isinstance(outcome.exception, self.definitive_errors) else S.OUTCOME_UNKNOWN
            return await self.operations.settle(record, status, error=outcome.error)
        if self.is_failure(outcome.value):
            return await self.operations.settle(record, S.FAILED, result=outcome.value, error=_REPORTED)
        return await self.operations.settle(record, S.SUCCEEDED, result=outcome.value)

    @staticmethod
    def _result_of(request: WriteRequest, stored: OperationRecord, outcome: HandlerOutcome) -> GateResult:
        if stored.status == S.SUCCEEDED:
            return request.result(GateStatus.EXECUTED, stored.result)
        if stored.status == S.FAILED:
            if outcome.exception is not None and outcome.error is not None and stored.result is None:
                return request.result(GateStatus.FAILED, reason=f"the tool failed: {outcome.error}", kind="error")
            return request.result(GateStatus.FAILED, stored.result, stored.error or _REPORTED, "reported_error")
        reason = (f"outcome unknown: the tool failed after the request may have reached the backend ({outcome.error}); "
                  "the action may or may not have happened")
        return request.result(GateStatus.OUTCOME_UNKNOWN, reason=reason, kind="ambiguous_error")

    async def _follow(self, record: OperationRecord, task: asyncio.Future[Any], reason: str) -> None:
        """Record the operation as unknown (in place if inline), then follow its handler until it returns."""
        self._told_unknown.add(record.idempotency_key)
        marked = None
        if self.operations.inline:
            with contextlib.suppress(Exception):  # else in the background, retried
                marked = await self._mark_unknown(record, reason)
        self._late.watch(self._late_reply(record, task, reason, marked))

    def _mark_unknown(self, record: OperationRecord, reason: str) -> Awaitable[OperationRecord]:
        return self.operations.settle(record, S.OUTCOME_UNKNOWN, error=reason, lease_until=record.lease_until)

    async def _late_reply(self, record: OperationRecord, task: asyncio.Future[Any], reason: str,
                          marked: OperationRecord | None) -> None:
        within = self.settle_retry_secs
        try:
            if marked is None:
                marked = await retrying(lambda: self._mark_unknown(record, reason), within_secs=within)
        except Exception as exc:  # its outcome below is written all the same
            logger.warning(f"could not record {record.idempotency_key} as unknown: {exc}")
        # A settle answers with the stored record, which may be a later attempt (this one was voided and the
        # operation started again meanwhile): the handler's outcome is evidence about its own attempt only.
        if marked is not None and marked.attempt == record.attempt:
            record = marked
        outcome = await await_deadline(task, None)
        stored = await retrying(lambda: self._settle_outcome(record, outcome), within_secs=within)
        if stored.attempt == record.attempt and stored.status == S.OUTCOME_UNKNOWN:
            await retrying(lambda: self.operations.release(stored), within_secs=within)
        elif stored.status not in _UNSETTLED:  # a later attempt's outcome is the operation's too
            self._note_settled(stored, "late_reply")

    def _note_settled(self, record: OperationRecord, source: str) -> None:
        if record.idempotency_key in self._told_unknown:
            self._told_unknown.discard(record.idempotency_key)
            self._settled.append(record)
            if record.resource and record.status == S.SUCCEEDED:
                self._unseen_commits[record.resource] = record
        evidence = {"tool": record.op_type, "idempotency_key": record.idempotency_key, "status": record.status.value}
        self.reporter.record("reconciled", {**evidence, "source": source})

    def take_settled(self) -> list[OperationRecord]:
        """Operations the model was told were unknown and that have settled since (each returned once)."""
        settled, self._settled = self._settled, []
        return settled

    async def reconcile(self, record: OperationRecord, evidence: Mapping[str, Any] | None = None) -> OperationRecord:
        """Ask the tool's reconciler what became of an unknown operation (a failed answer only for a voided attempt)."""
        reconciler = self.reconcilers.get(record.op_type) or self.reconciler
        if reconciler is None or record.status != S.OUTCOME_UNKNOWN:
            return record
        try:
            settled = await self.operations.reconcile(record, reconciler, self.grace_secs)
        except Exception as exc:  # the backend could not answer: still unknown
            logger.warning(f"reconciliation of {record.idempotency_key} failed: {exc}")
            return record
        if settled.status != S.OUTCOME_UNKNOWN:
            self._note_settled(settled, "reconciler")
        return settled

    async def reconcile_pending(self, scope_prefix: str) -> list[OperationRecord]:
        """Recover records of a call a gone owner left executing, then reconcile every unknown one."""
        await self.operations.recover(scope_prefix, self.grace_secs)
        return [await self.reconcile(r) for r in await self.operations.unknown(scope_prefix)]

    @property
    def late_replies(self) -> LateReplies:
        """The handlers followed past their deadline, and outcomes still being recorded."""
        return self._late
