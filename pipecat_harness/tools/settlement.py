"""What becomes of a write once its handler started: its outcome settled, late replies followed, reconciliation.

:class:`Settlements` is the half of :class:`~pipecat_harness.tools.writes.WriteRunner`
that runs after the handler began. A handler's outcome is written with
retries (:func:`~pipecat_harness.tools.store_calls.retrying`) for at most the
tool's deadline; past it (or if the caller is cancelled) it is written again
off the loop, and the outcome is ``outcome_unknown`` to the model. A handler that misses its deadline, or
whose caller is cancelled, is followed until it returns (never cancelled)
and keeps its lease until then; its reply settles the operation. Whatever the
model was told was unknown and then settled is handed, once, to whoever
tells the model at its next generation (:meth:`Settlements.take_settled`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from loguru import logger

from pipecat_harness.tools.execution import HandlerOutcome, LateReplies, await_deadline
from pipecat_harness.tools.operation_state import OperationRecord, OperationRefused, OperationStatus, Reconciler
from pipecat_harness.tools.operations import Operations
from pipecat_harness.tools.result import GateResult, GateStatus
from pipecat_harness.tools.store_calls import retrying

__all__ = ["GateReporter", "Settlements"]

S = OperationStatus
_UNSETTLED = (S.EXECUTING, S.OUTCOME_UNKNOWN)


class GateReporter(Protocol):
    """How the write runner records decisions (implemented by the gate)."""

    def refuse(self, status: GateStatus, name: str, write: bool, evidence: dict[str, Any], kind: str,
               reason: str, *, result: Any = None, key: str | None = None) -> GateResult:
        """Record a refusal and return its result."""

    @property
    def recording(self) -> bool:
        """Whether decisions are recorded anywhere."""

    def record(self, action: str, evidence: dict[str, Any]) -> Any:
        """Record a decision."""

    def outcome(self, decision: Any, result: GateResult) -> None:
        """Attach what followed a decision."""


class Settlements:
    """Settles the write operations of one gate once their handlers started.

    Args:
        operations: The operation store.
        reporter: Records decisions.
        timeout_secs: Deadline of a handler (past it the outcome is unknown) and of the gate's own ledger writes.
        is_failure: Tells a returned error from a success.
        definitive_errors: Exceptions meaning "the backend said no" (besides :class:`OperationRefused`).
        settle_retry_secs: How long an outcome the ledger failed to record is written again.
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
        # A dead owner's request may still land for its timeout after the death was seen.
        self.grace_secs = timeout_secs or 0.0
        self.settle_retry_secs = settle_retry_secs
        self._late = LateReplies()
        self._told_unknown: set[str] = set()
        self._settled: list[OperationRecord] = []
        # Writes the model was told were unknown that then went through, by resource:
        # a different write on that resource is answered with this news first.
        self._unseen_commits: dict[str, OperationRecord] = {}

    async def _finish(self, name: str, record: OperationRecord, task: asyncio.Future[Any],
                      ended: asyncio.Future[None], warnings: tuple[str, ...], decision: Any,
                      evidence: dict[str, Any]) -> GateResult:
        key = record.idempotency_key
        try:
            outcome = await await_deadline(task, self.timeout_secs, ended)
        except asyncio.CancelledError:
            # Cancelled from outside (Pipecat's own deadline, the call ending): the model was told the call did
            # not complete; the handler goes on, and its outcome settles the operation and is told next time.
            await self._follow(record, task, "the call was cancelled while the tool ran")
            raise
        if outcome.timed_out:
            await self._follow(record, task, f"no reply within {self.timeout_secs:g}s")
            return self._unknown(name, key, warnings, decision, evidence, "timeout", (
                f"outcome unknown: no reply within {self.timeout_secs:g}s; the action may or may not have happened"))
        stored = await self._record_outcome(record, outcome)
        if stored is None:
            return self._unknown(name, key, warnings, decision, evidence, "store_error", (
                "outcome unknown: the tool replied but the operation ledger could not record it in time; it is "
                "being recorded and you will be told"))
        if stored.status == S.OUTCOME_UNKNOWN:  # raised after the request may have reached the backend
            stored = await self.reconcile(stored, evidence)
        result = self._result_of(name, stored, outcome, warnings)
        if result.status == GateStatus.OUTCOME_UNKNOWN:
            self._told_unknown.add(key)
        self.reporter.outcome(decision, result)
        return result

    def _unknown(self, name: str, key: str, warnings: tuple[str, ...], decision: Any, evidence: dict[str, Any],
                 kind: str, reason: str) -> GateResult:
        result = GateResult(GateStatus.OUTCOME_UNKNOWN, name, reason=reason, write=True, idempotency_key=key,
                            warnings=warnings, reason_kind=kind)
        self.reporter.outcome(decision, result)
        self.reporter.record("outcome_unknown", {**evidence, "reason": reason})
        return result

    async def _record_outcome(self, record: OperationRecord, outcome: HandlerOutcome) -> OperationRecord | None:
        """Settle the handler's outcome (retried); ``None`` if the ledger did not take it within the deadline.

        If the deadline passes or the caller is cancelled, it is written again in the background (the
        compare-and-set makes that a no-op if the first write landed) and told at the next generation.
        """
        if self.operations.inline:  # an in-process store never suspends: nothing can come in between
            with contextlib.suppress(Exception):  # if it failed: retried as below
                return await self._settle_outcome(record, outcome)
        limit = asyncio.timeout(self.timeout_secs)
        try:
            async with limit:
                return await retrying(lambda: self._settle_outcome(record, outcome),
                                      within_secs=self.settle_retry_secs)
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
            if isinstance(outcome.exception, self.definitive_errors):
                return await self.operations.settle(record, S.FAILED, error=outcome.error)
            return await self.operations.settle(record, S.OUTCOME_UNKNOWN, error=outcome.error)
        if self.is_failure(outcome.value):
            return await self.operations.settle(record, S.FAILED, result=outcome.value,
                                                error="the tool reported an error")
        return await self.operations.settle(record, S.SUCCEEDED, result=outcome.value)

    def _result_of(self, name: str, stored: OperationRecord, outcome: HandlerOutcome,
                   warnings: tuple[str, ...]) -> GateResult:
        key = stored.idempotency_key
        if stored.status == S.SUCCEEDED:
            return GateResult(GateStatus.EXECUTED, name, stored.result, write=True, idempotency_key=key,
                              warnings=warnings)
        if stored.status == S.FAILED:
            if outcome.exception is not None and outcome.error is not None and stored.result is None:
                return GateResult(GateStatus.FAILED, name, reason=f"the tool failed: {outcome.error}", write=True,
                                  idempotency_key=key, warnings=warnings, reason_kind="error")
            return GateResult(GateStatus.FAILED, name, stored.result, stored.error or "the tool reported an error",
                              write=True, idempotency_key=key, warnings=warnings, reason_kind="reported_error")
        return GateResult(GateStatus.OUTCOME_UNKNOWN, name, reason=(
            f"outcome unknown: the tool failed after the request may have reached the backend ({outcome.error}); "
            "the action may or may not have happened"), write=True, idempotency_key=key, warnings=warnings,
            reason_kind="ambiguous_error")

    # -- late replies, reconciliation, recovery --------------------------------

    async def _follow(self, record: OperationRecord, task: asyncio.Future[Any], reason: str) -> None:
        """Record the operation as unknown, then follow its handler until it returns (never cancelling it).

        An inline store records it in place, so the next call reads it unknown (as after a ledger's queued write).
        """
        self._told_unknown.add(record.idempotency_key)
        marked = None
        if self.operations.inline:
            with contextlib.suppress(Exception):  # else in the background, retried
                marked = await self.operations.settle(record, S.OUTCOME_UNKNOWN, error=reason,
                                                      lease_until=record.lease_until)
        self._late.watch(self._late_reply(record, task, reason, marked))

    async def _late_reply(self, record: OperationRecord, task: asyncio.Future[Any], reason: str,
                          marked: OperationRecord | None) -> None:
        within = self.settle_retry_secs
        try:
            if marked is None:
                marked = await retrying(lambda: self.operations.settle(
                    record, S.OUTCOME_UNKNOWN, error=reason, lease_until=record.lease_until), within_secs=within)
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
        self.reporter.record("reconciled", {"tool": record.op_type, "idempotency_key": record.idempotency_key,
                                            "status": record.status.value, "source": source})

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
