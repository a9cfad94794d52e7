"""The life of one write operation at the gate: start or find it, reconcile, run, settle.

One record per logical operation (:mod:`pipecat_harness.tools.identity`):

* a new operation is created ``executing`` under this gate's owner token and
  lease, and its handler runs once;
* a succeeded one is answered with its stored result (``not_executed``);
* an ``executing`` one whose owner may still run it is "in progress"; one whose
  owner is gone (for longer than the tool's timeout) becomes ``outcome_unknown``;
* an ``outcome_unknown`` one is reconciled before anything else happens to it;
  while still unknown it is never run again;
* a failed (the backend said no, or the attempt was voided) or cancelled one
  starts a new attempt under the same key.

Handler protocol: a result ``is_failure`` accepts (``{"error": ...}``) or a
:class:`OperationRefused` is a definitive failure; any other exception, a
timeout, a lost reply or a cancellation is ambiguous, i.e. ``outcome_unknown``.
A handler is never cancelled by the gate (a cancelled request may still land):
past the deadline, or when the caller is cancelled, it is followed until it
returns and keeps its lease until then (:mod:`pipecat_harness.tools.settlement`).

The gate's own ledger writes wait at most the tool's deadline and survive a
cancellation of the caller (:mod:`pipecat_harness.tools.store_calls`); once
the handler has started, a ledger that fails is ``outcome_unknown`` to the
model while the handler's outcome is written again off the loop. Two
different writes on one resource are serialised by a lock per resource in the
process and by the ledger's unique claim of the resource across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

from pipecat_harness.tools.execution import spawn
from pipecat_harness.tools.identity import OperationIdentity
from pipecat_harness.tools.operation_state import OperationRecord, OperationStatus, ResourceBusy
from pipecat_harness.tools.operations import Operations
from pipecat_harness.tools.owners import handler_may_run, new_owner, release_owner
from pipecat_harness.tools.result import ALREADY_DONE, GateResult, GateStatus
from pipecat_harness.tools.settlement import GateReporter, Settlements
from pipecat_harness.tools.store_calls import StoreTimeout, owned, retrying, transient

__all__ = ["GateReporter", "WriteRunner"]

S = OperationStatus

def _created(started: tuple[OperationRecord, bool]) -> OperationRecord | None:
    """A start's record if the start created it."""
    return started[0] if started[1] else None


_NEVER_LEFT = "not executed: the call was cancelled (or the ledger was too slow) before its handler started"


class WriteRunner(Settlements):
    """Runs write operations for one gate: starts or finds each, runs its handler once, hands it on to settle.

    Args:
        operations: The operation store.
        reporter: Records decisions.
        timeout_secs: Deadline of a handler (past it the outcome is unknown) and of the gate's own ledger writes.
        late_reply_secs: How long a timed-out handler is expected to go on (its lease covers it).
        is_failure: Tells a returned error from a success.
        definitive_errors: Exceptions meaning "the backend said no" (besides :class:`OperationRefused`).
        settle_retry_secs: How long an outcome the ledger failed to record is written again.
    """

    def __init__(self, operations: Operations, reporter: GateReporter, *, timeout_secs: float | None,
                 late_reply_secs: float, is_failure: Callable[[Any], bool],
                 definitive_errors: tuple[type[BaseException], ...] = (), settle_retry_secs: float = 120.0) -> None:
        super().__init__(operations, reporter, timeout_secs=timeout_secs, is_failure=is_failure,
                         definitive_errors=definitive_errors, settle_retry_secs=settle_retry_secs)
        self.owner = new_owner()
        # The longest a handler of ours is expected to run: the deadline, then the late-reply window.
        self.lease_secs = (timeout_secs or 0.0) + late_reply_secs + 5.0
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self._running: dict[str, asyncio.Future[GateResult]] = {}
        self._handlers: set[asyncio.Future[Any]] = set()
        self._handler_keys: Counter[str] = Counter()  # keys with a handler of this gate still running
        self._closed = False

    # -- one write -----------------------------------------------------------

    def _lock(self, name: str) -> tuple[asyncio.Lock, list[int]]:
        entry = self._locks.get(name)
        if entry is None:
            entry = self._locks[name] = (asyncio.Lock(), [0])
        entry[1][0] += 1
        return entry

    def _unlock(self, name: str, users: list[int]) -> None:
        users[0] -= 1
        if not users[0]:
            del self._locks[name]

    async def run(self, name: str, arguments: dict[str, Any], handler: Any, identity: OperationIdentity,
                  evidence: dict[str, Any], warnings: tuple[str, ...],
                  should_proceed: Callable[[], bool] | None) -> GateResult:
        """Run (or answer without running) one write request."""
        key = identity.key
        evidence["idempotency_key"] = key
        # One lock per key (and one per resource) while someone uses it, dropped after.
        lock, users = self._lock(key)
        try:
            async with lock:
                running = self._running.get(key)
                if running is None:
                    if identity.resource:
                        slot = f"\x00{identity.resource}"
                        resource_lock, resource_users = self._lock(slot)
                        try:
                            async with resource_lock:
                                refused, record = await self._begin(name, identity, evidence, should_proceed)
                        finally:
                            self._unlock(slot, resource_users)
                    else:
                        refused, record = await self._begin(name, identity, evidence, should_proceed)
                    if refused is not None:
                        return refused
                    assert record is not None
                    finished: asyncio.Future[GateResult] = asyncio.get_running_loop().create_future()
                    self._running[key] = finished
                    task, ended = spawn(lambda: handler(arguments), record)
                    evidence["forwarded"] = True  # from here on, a failure of the gate is an unknown outcome
                    self._handlers.add(task)
                    self._handler_keys[key] += 1
                    task.add_done_callback(lambda done: self._handler_returned(done, key))
        finally:
            self._unlock(key, users)
        if running is not None:
            return self._repeat_of(name, await asyncio.shield(running), evidence)
        assert record is not None
        decision = None
        if self.reporter.recording:
            decision = self.reporter.record("forwarded", {**evidence, "attempt": record.attempt,
                                                          "warnings": list(warnings)})
        try:
            result = await self._finish(name, record, task, ended, warnings, decision, evidence)
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

    def _handler_returned(self, task: asyncio.Future[Any], key: str) -> None:
        self._handlers.discard(task)
        self._handler_keys[key] -= 1
        if not self._handler_keys[key]:
            del self._handler_keys[key]
        if self._closed and not self._handlers:
            release_owner(self.owner)

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
        slot = f"{identity.call_id}:{identity.resource}" if identity.resource else ""
        if slot:
            held = await self._conflict(name, identity, slot, evidence)
            if held is not None:
                return held, None
        try:
            record, created = await self._own(
                self.operations.start(key, name, identity.request_hash, identity.scope, self.owner,
                                      self.operations.now() + self.lease_secs, slot), key, 1, _created)
        except ResourceBusy:
            return self._busy(name, identity, evidence), None
        if created:
            return None, record
        for _ in range(4):
            if record.status == S.EXECUTING:
                if handler_may_run(record, self.operations.now(), self.grace_secs):
                    return refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "in_flight",
                                  "not executed: the same request is being carried out; its outcome is not "
                                  "known yet", key=key), None
                record = await self._bounded(self.operations.settle(
                    record, S.OUTCOME_UNKNOWN, error="its owner stopped while it was executing"))
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
                try:
                    claimed = await self._own(
                        self.operations.claim(record, self.owner, self.operations.now() + self.lease_secs), key,
                        record.attempt + 1)
                except ResourceBusy:
                    return self._busy(name, identity, evidence), None
                if claimed is not None:
                    return None, claimed
            record = await self.operations.get(key) or record
        return refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "in_flight",
                      "not executed: the same request is being carried out elsewhere", key=key), None

    async def _bounded(self, write: Any) -> Any:
        """A ledger write of the gate's own, waited for at most the tool's deadline."""
        return await asyncio.wait_for(write, self.timeout_secs)

    async def _own(self, write: Any, key: str, attempt: int,
                   mine: Callable[[Any], OperationRecord | None] | None = None) -> Any:
        """Run a start or claim of ``attempt`` (see :func:`owned`), settling what it committed if it is lost.

        Given up on, or failed in a way that may have committed, the write's record is settled "not executed"
        (``mine``: the record the write's answer makes this gate's; by default the answer itself).
        """
        try:
            return await owned(write, self.timeout_secs,
                               functools.partial(self._never_left, mine=mine, key=key, attempt=attempt),
                               inline=self.operations.inline)
        except StoreTimeout:  # given up on: _never_left follows the write
            raise
        except Exception as exc:
            if transient(exc):  # the database, not the state machine, said no: it may have committed all the same
                await self._settle_lost(key, attempt)
            raise

    def _never_left(self, write: asyncio.Future[Any], mine: Callable[[Any], OperationRecord | None] | None,
                    key: str, attempt: int) -> None:
        """The caller gave up on a start or claim: if it commits, its handler never ran; settle it, off the loop."""
        async def settle() -> None:
            try:
                answer = await write
                record = answer if mine is None else mine(answer)
            except Exception:  # it failed, yet may have committed: read back under the key's lock
                lock, users = self._lock(key)
                try:
                    async with lock:
                        await self._settle_lost(key, attempt)
                finally:
                    self._unlock(key, users)
                return
            if record:
                await retrying(lambda: self.operations.settle(record, S.FAILED, error=_NEVER_LEFT),
                               within_secs=self.settle_retry_secs)
        self._late.watch(settle())

    async def _settle_lost(self, key: str, attempt: int) -> None:
        """A start or claim failed, but may have committed (its answer lost with the connection): if so, settle it.

        Run under the key's lock, so no other call of this gate starts the key meanwhile; executing at
        ``attempt`` under this gate's owner with no handler of the key running here, the record is that write.
        Bounded by the tool's deadline; if the ledger cannot say, the lease and the sweeper settle it.
        """
        if self.operations.inline:
            return
        with contextlib.suppress(Exception):
            stored = await self._bounded(self.operations.get(key))
            if stored is not None and stored.status == S.EXECUTING and stored.owner == self.owner \
                    and stored.attempt == attempt and not self._handler_keys[key]:
                await self._bounded(self.operations.settle(stored, S.FAILED, error=_NEVER_LEFT))

    def _busy(self, name: str, identity: OperationIdentity, evidence: dict[str, Any]) -> GateResult:
        return self.reporter.refuse(
            GateStatus.NOT_EXECUTED, name, True, evidence, "conflict",
            f"not executed: another change to {identity.resource} is being carried out; its outcome is not known "
            "yet. Tell the caller you are checking, and do not change it until it is known.", key=identity.key)

    async def _conflict(self, name: str, identity: OperationIdentity, slot: str,
                        evidence: dict[str, Any]) -> GateResult | None:
        """Hold a different write on a resource whose earlier write is in flight or of unknown outcome."""
        prefix = f"{identity.call_id}:"
        for other in await self.operations.unsettled_on(prefix, slot):
            if other.idempotency_key == identity.key:
                continue
            if other.status == S.EXECUTING and not handler_may_run(other, self.operations.now(), self.grace_secs):
                other = await self._bounded(self.operations.settle(
                    other, S.OUTCOME_UNKNOWN, error="its owner stopped while it was executing"))
            if other.status == S.OUTCOME_UNKNOWN:
                self._told_unknown.add(other.idempotency_key)  # whatever it turns out to be, the model hears it
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
        commit = self._unseen_commits.pop(slot, None)
        if commit is not None and commit.idempotency_key != identity.key:
            evidence["conflicts_with"] = commit.idempotency_key
            return self.reporter.refuse(
                GateStatus.NOT_EXECUTED, name, True, evidence, "conflict",
                f"not executed: the earlier {commit.op_type} on {identity.resource} went through after all "
                f"(result: {commit.result}); it is done, so change or reschedule it instead of doing it again.",
                key=identity.key)
        return None

    def stop(self) -> None:
        """Start no more writes.

        Running handlers are not cancelled (a cancelled request may still
        land): each keeps its lease until it returns and its outcome is
        recorded. The owner token is released after the last one returned.
        """
        self._closed = True
        if not self._handlers:
            release_owner(self.owner)

    async def close(self) -> None:
        """See :meth:`stop`."""
        self.stop()
