"""The life of one write operation at the gate: start or find it, reconcile, run, settle.

One record per logical operation (:mod:`pipecat_harness.tools.identity`):

* a new operation is created ``executing`` under this gate's owner token and
  lease, and its handler runs once;
* a succeeded one is answered with its stored result (``not_executed``);
* an ``executing`` one whose owner may still run it is "in progress"; one whose
  owner is gone becomes ``outcome_unknown``;
* an ``outcome_unknown`` one is reconciled before anything else happens to it;
  while still unknown it is never run again;
* a failed (the backend said no) or cancelled one starts a new attempt under
  the same key.

Handler protocol: a result ``is_failure`` accepts (``{"error": ...}``) or a
:class:`OperationRefused` is a definitive failure; any other exception, a
timeout, a lost reply or a cancellation is ambiguous, i.e. ``outcome_unknown``.
A reply after the deadline (within the late-reply window) settles the
operation; :meth:`WriteRunner.take_settled` hands such settlements to whoever
tells the model at its next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from loguru import logger

from pipecat_harness.tools.execution import HandlerOutcome, LateReplies, await_deadline, start_handler
from pipecat_harness.tools.identity import OperationIdentity
from pipecat_harness.tools.operation_state import OperationRecord, OperationRefused, OperationStatus, Reconciler
from pipecat_harness.tools.operations import Operations
from pipecat_harness.tools.owners import handler_may_run, new_owner, release_owner
from pipecat_harness.tools.result import ALREADY_DONE, GateResult, GateStatus

__all__ = ["GateReporter", "WriteRunner"]

S = OperationStatus


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


class WriteRunner:
    """Runs write operations for one gate.

    Args:
        operations: The operation store.
        reporter: Records decisions.
        timeout_secs: Deadline of a handler; past it the outcome is unknown.
        late_reply_secs: How long a timed-out handler keeps running.
        is_failure: Tells a returned error from a success.
        definitive_errors: Exceptions meaning "the backend said no" (besides :class:`OperationRefused`).
    """

    def __init__(self, operations: Operations, reporter: GateReporter, *, timeout_secs: float | None,
                 late_reply_secs: float, is_failure: Callable[[Any], bool],
                 definitive_errors: tuple[type[BaseException], ...] = ()) -> None:
        self.operations = operations
        self.reporter = reporter
        self.timeout_secs = timeout_secs
        self.is_failure = is_failure
        self.definitive_errors: tuple[type[BaseException], ...] = (OperationRefused, *definitive_errors)
        self.reconciler: Reconciler | None = None
        self.reconcilers: dict[str, Reconciler] = {}
        self.owner = new_owner()
        # The longest a handler of ours can run: the deadline, then the late-reply window.
        self.lease_secs = (timeout_secs or 0.0) + late_reply_secs + 5.0
        self._late = LateReplies(late_reply_secs)
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self._running: dict[str, asyncio.Future[GateResult]] = {}
        self._watched: dict[str, OperationRecord] = {}
        self._told_unknown: set[str] = set()
        self._settled: list[OperationRecord] = []
        self._handlers: set[asyncio.Future[Any]] = set()
        # Writes the model was told were unknown that then went through, by resource:
        # a different write on that resource is answered with this news first.
        self._unseen_commits: dict[str, OperationRecord] = {}
        self._closed = False

    # -- one write -----------------------------------------------------------

    async def run(self, name: str, arguments: dict[str, Any], handler: Any, identity: OperationIdentity,
                  evidence: dict[str, Any], warnings: tuple[str, ...],
                  should_proceed: Callable[[], bool] | None) -> GateResult:
        """Run (or answer without running) one write request."""
        key = identity.key
        evidence["idempotency_key"] = key
        # One lock per key while someone uses it, dropped after (a long call does not collect them).
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                running = self._running.get(key)
                if running is None:
                    refused, record = await self._begin(name, identity, evidence, should_proceed)
                    if refused is not None:
                        return refused
                    assert record is not None
                    finished: asyncio.Future[GateResult] = asyncio.get_running_loop().create_future()
                    self._running[key] = finished
                    task = start_handler(handler, arguments, record)
                    self._handlers.add(task)
                    task.add_done_callback(self._handlers.discard)
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[key]
        if running is not None:
            return self._repeat_of(name, await asyncio.shield(running), evidence)
        assert record is not None
        decision = None
        if self.reporter.recording:
            decision = self.reporter.record("forwarded", {**evidence, "attempt": record.attempt,
                                                          "warnings": list(warnings)})
        try:
            result = await self._finish(name, record, task, warnings, decision, evidence)
        except BaseException:
            finished.set_result(GateResult(GateStatus.OUTCOME_UNKNOWN, name, write=True, idempotency_key=key,
                                           reason="not executed again: the same request's outcome is unknown",
                                           reason_kind="outcome_unknown"))
            raise
        finally:
            if self._running.get(key) is finished:
                del self._running[key]
        finished.set_result(result)
        return result

    def _repeat_of(self, name: str, previous: GateResult, evidence: dict[str, Any]) -> GateResult:
        key = previous.idempotency_key
        if previous.status == GateStatus.EXECUTED:
            return self.reporter.refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate",
                                        "not executed: the same request was already in progress and is done",
                                        result=previous.result, key=key)
        if previous.status == GateStatus.FAILED:
            return self.reporter.refuse(GateStatus.FAILED, name, True, evidence, "duplicate",
                                        f"not executed: the same request just failed ({previous.reason})",
                                        result=previous.result, key=key)
        return self.reporter.refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "outcome_unknown",
                                    "not executed: the same request is still of unknown outcome", key=key)

    async def _begin(self, name: str, identity: OperationIdentity, evidence: dict[str, Any],
                     should_proceed: Callable[[], bool] | None) -> tuple[GateResult | None, OperationRecord | None]:
        key = identity.key
        refuse = self.reporter.refuse
        if should_proceed is not None and not should_proceed():
            return refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "interrupted",
                          "not executed: the reply that requested it was interrupted", key=key), None
        if self._closed:
            return refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "closed",
                          "not executed: the call is ending", key=key), None
        if identity.resource:
            held = await self._conflict(name, identity, evidence)
            if held is not None:
                return held, None
        record, created = await self.operations.start(key, name, identity.request_hash, identity.scope,
                                                      self.owner, time.time() + self.lease_secs, identity.resource)
        if created:
            return None, record
        for _ in range(4):
            if record.status == S.EXECUTING:
                if handler_may_run(record, time.time()):
                    return refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "in_flight",
                                  "not executed: the same request is being carried out; its outcome is not "
                                  "known yet", key=key), None
                record = await self.operations.settle(record, S.OUTCOME_UNKNOWN,
                                                      error="its owner stopped while it was executing")
            if record.status == S.OUTCOME_UNKNOWN:
                record = await self.reconcile(record, evidence)
            if record.status == S.OUTCOME_UNKNOWN:
                self._told_unknown.add(key)
                return refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "outcome_unknown",
                              "not executed: an earlier attempt's outcome is still unknown; it is being checked",
                              key=key), None
            if record.status == S.SUCCEEDED:
                return refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate", ALREADY_DONE,
                              result=record.result, key=key), None
            if record.retryable:
                claimed = await self.operations.claim(record, self.owner, time.time() + self.lease_secs)
                if claimed is not None:
                    return None, claimed
            record = await self.operations.get(key) or record
        return refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "in_flight",
                      "not executed: the same request is being carried out elsewhere", key=key), None

    async def _conflict(self, name: str, identity: OperationIdentity,
                        evidence: dict[str, Any]) -> GateResult | None:
        """Hold a different write on a resource whose earlier write is in flight or of unknown outcome."""
        prefix = f"{identity.call_id}:"
        for other in await self.operations.unsettled_on(prefix, identity.resource):
            if other.idempotency_key != identity.key and other.status == S.OUTCOME_UNKNOWN:
                self._told_unknown.add(other.idempotency_key)  # whatever it turns out to be, the model hears it
            if other.idempotency_key == identity.key:
                continue
            if other.status == S.EXECUTING and not handler_may_run(other, time.time()):
                other = await self.operations.settle(other, S.OUTCOME_UNKNOWN,
                                                     error="its owner stopped while it was executing")
            if other.status == S.OUTCOME_UNKNOWN:
                other = await self.reconcile(other, evidence)
            if other.status in (S.EXECUTING, S.OUTCOME_UNKNOWN):
                state = "still being carried out" if other.status == S.EXECUTING else "of unknown outcome"
                self._told_unknown.add(other.idempotency_key)
                evidence["conflicts_with"] = other.idempotency_key
                return self.reporter.refuse(
                    GateStatus.NOT_EXECUTED, name, True, evidence, "conflict",
                    f"not executed: the earlier {other.op_type} on {identity.resource} is {state}; checking whether "
                    f"it went through. Tell the caller you are checking, and do not change it until it is known.",
                    key=identity.key)
        commit = self._unseen_commits.pop(identity.resource, None)
        if commit is not None and commit.idempotency_key != identity.key:
            evidence["conflicts_with"] = commit.idempotency_key
            return self.reporter.refuse(
                GateStatus.NOT_EXECUTED, name, True, evidence, "conflict",
                f"not executed: the earlier {commit.op_type} on {identity.resource} went through after all "
                f"(result: {commit.result}); it is done, so change or reschedule it instead of doing it again.",
                key=identity.key)
        return None

    async def _finish(self, name: str, record: OperationRecord, task: asyncio.Future[Any],
                      warnings: tuple[str, ...], decision: Any, evidence: dict[str, Any]) -> GateResult:
        key = record.idempotency_key
        try:
            outcome = await await_deadline(task, self.timeout_secs)
        except asyncio.CancelledError:
            # Cancelled from outside (a framework deadline, the call ending): the
            # write keeps running under its lease and its reply, if any, settles it.
            unknown = await asyncio.shield(self.operations.settle(
                record, S.OUTCOME_UNKNOWN, error="the call was cancelled while the tool ran",
                lease_until=record.lease_until))
            self._watch(unknown, task)
            raise
        if outcome.timed_out:
            unknown = await self.operations.settle(record, S.OUTCOME_UNKNOWN, lease_until=record.lease_until,
                                                   error=f"no reply within {self.timeout_secs:g}s")
            self._watch(unknown, task)
            self._told_unknown.add(key)
            result = GateResult(GateStatus.OUTCOME_UNKNOWN, name, reason=(
                f"outcome unknown: no reply within {self.timeout_secs:g}s; the action may or may not have happened"),
                write=True, idempotency_key=key, warnings=warnings, reason_kind="timeout")
            self.reporter.outcome(decision, result)
            self.reporter.record("outcome_unknown", {**evidence, "reason": result.reason})
            return result
        stored = await self._settle_outcome(record, outcome)
        if stored.status == S.OUTCOME_UNKNOWN:  # raised after the request may have reached the backend
            stored = await self.reconcile(stored, evidence)
        result = self._result_of(name, stored, outcome, warnings)
        if result.status == GateStatus.OUTCOME_UNKNOWN:
            self._told_unknown.add(key)
        self.reporter.outcome(decision, result)
        return result

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

    def _watch(self, record: OperationRecord, task: asyncio.Future[Any]) -> None:
        self._watched[record.idempotency_key] = record
        self._late.watch(task, lambda outcome: self._late_reply(record, outcome))

    async def _late_reply(self, record: OperationRecord, outcome: HandlerOutcome | None) -> None:
        self._watched.pop(record.idempotency_key, None)
        if outcome is None:  # the window passed and the handler was cancelled: it no longer runs
            await self.operations.release(record)
            return
        stored = await self._settle_outcome(record, outcome)
        if stored.status == S.OUTCOME_UNKNOWN:
            await self.operations.release(stored)
            return
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
        """Ask the tool's reconciler what became of an unknown operation (fenced by the owner's lease)."""
        reconciler = self.reconcilers.get(record.op_type) or self.reconciler
        if reconciler is None or record.status != S.OUTCOME_UNKNOWN:
            return record
        try:
            settled = await self.operations.reconcile(record, reconciler)
        except Exception as exc:  # the backend could not answer: still unknown
            logger.warning(f"reconciliation of {record.idempotency_key} failed: {exc}")
            return record
        if settled.status != S.OUTCOME_UNKNOWN:
            self._note_settled(settled, "reconciler")
        return settled

    async def reconcile_pending(self, scope_prefix: str) -> list[OperationRecord]:
        """Recover records of a call a gone owner left executing, then reconcile every unknown one."""
        await self.operations.recover(scope_prefix)
        return [await self.reconcile(r) for r in await self.operations.unknown(scope_prefix)]

    @property
    def late_replies(self) -> LateReplies:
        """The timed-out handlers still awaited."""
        return self._late

    async def close(self) -> None:
        """Stop every handler of this gate (cancelling them), then end its leases.

        Only once no handler of ours can still run is the owner token released,
        so that others may take "not found" from the backend as "failed".
        """
        self._closed = True
        await self._late.close()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        release_owner(self.owner)
        for record in list(self._watched.values()):
            with contextlib.suppress(Exception):
                await self.operations.release(record)
        self._watched.clear()
