"""The life of one write operation at the gate: start or find it, reconcile, run, settle.

A new operation runs its handler once, ``executing`` under the gate's owner token and lease; a succeeded one is
answered with its stored result; an unknown one is reconciled, never run while unknown; a failed or cancelled one
starts a new attempt under the same key. Writes on one resource are serialised in and across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pipecat_harness.tools.execution import spawn
from pipecat_harness.tools.identity import OperationIdentity
from pipecat_harness.tools.operation_state import OperationRecord, OperationStatus, ResourceBusy
from pipecat_harness.tools.operations import Operations
from pipecat_harness.tools.owners import handler_may_run, new_owner, release_owner
from pipecat_harness.tools.result import ALREADY_DONE, GateResult, GateStatus
from pipecat_harness.tools.settlement import GateReporter, Settlements, WriteRequest
from pipecat_harness.tools.store_calls import StoreTimeout, owned, retrying, transient

__all__ = ["GateReporter", "WriteRunner"]

S = OperationStatus
T = TypeVar("T")
_NEVER_LEFT = "not executed: the call was cancelled (or the ledger was too slow) before its handler started"
_OWNER_STOPPED = "its owner stopped while it was executing"
_TELL = "Tell the caller you are checking, and do not change it until it is known."


class WriteRunner(Settlements):
    """Runs write operations for one gate: starts or finds each, runs its handler once, hands it on to settle."""

    def __init__(self, operations: Operations, reporter: GateReporter, *, timeout_secs: float | None,
                 late_reply_secs: float, is_failure: Callable[[Any], bool],
                 definitive_errors: tuple[type[BaseException], ...] = (), settle_retry_secs: float = 120.0) -> None:
        super().__init__(operations, reporter, timeout_secs=timeout_secs, is_failure=is_failure,
                         definitive_errors=definitive_errors, settle_retry_secs=settle_retry_secs)
        self.owner = new_owner()
        self.lease_secs = (timeout_secs or 0.0) + late_reply_secs + 5.0  # the longest a handler of ours runs
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self._running: dict[str, asyncio.Future[GateResult]] = {}
        self._handlers: set[asyncio.Future[Any]] = set()
        self._handler_keys: Counter[str] = Counter()  # keys with a handler of this gate still running
        self._closed = False

    @contextlib.asynccontextmanager
    async def _locked(self, name: str) -> AsyncIterator[None]:
        """Hold the lock of a key (or resource), which exists while someone uses it."""
        entry = self._locks.get(name) or self._locks.setdefault(name, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1][0] -= 1
            if not entry[1][0]:
                del self._locks[name]

    async def run(self, name: str, arguments: dict[str, Any], handler: Any, identity: OperationIdentity,
                  evidence: dict[str, Any], warnings: tuple[str, ...],
                  should_proceed: Callable[[], bool] | None) -> GateResult:
        """Run (or answer without running) one write request."""
        key = evidence["idempotency_key"] = identity.key
        request = WriteRequest(self.reporter, name, key, evidence, warnings)
        async with self._locked(key):
            running = self._running.get(key)
            if running is None:
                async with self._locked(f"\x00{identity.resource}") if identity.resource else contextlib.nullcontext():
                    begun = await self._begin(request, identity, should_proceed)
                if isinstance(begun, GateResult):
                    return begun
                record = begun
                finished: asyncio.Future[GateResult] = asyncio.get_running_loop().create_future()
                self._running[key] = finished
                task, ended = spawn(lambda: handler(arguments), record)
                evidence["forwarded"] = True  # from here on, a failure of the gate is an unknown outcome
                self._handlers.add(task)
                self._handler_keys[key] += 1
                task.add_done_callback(lambda done: self._handler_returned(done, key))
        if running is not None:
            return self._repeat_of(request, await asyncio.shield(running))
        if self.reporter.recording:
            request.decision = self.reporter.record("forwarded",
                                                    {**evidence, "attempt": record.attempt, "warnings": list(warnings)})
        try:
            result = await self._finish(request, record, task, ended)
        except BaseException:
            reason = "not executed again: the same request's outcome is unknown"
            finished.set_result(request.result(GateStatus.OUTCOME_UNKNOWN, reason=reason, kind="outcome_unknown"))
            raise
        finally:
            if self._running.get(key) is finished:
                del self._running[key]
        finished.set_result(result)
        return result

    def _handler_returned(self, task: asyncio.Future[Any], key: str) -> None:
        self._handlers.discard(task)
        self._handler_keys -= Counter((key,))  # drops the key at zero
        if self._closed and not self._handlers:
            release_owner(self.owner)

    @staticmethod
    def _repeat_of(request: WriteRequest, previous: GateResult) -> GateResult:
        if previous.status == GateStatus.EXECUTED:
            reason = "not executed: the same request was already in progress and is done"
            return request.refuse(GateStatus.NOT_EXECUTED, "duplicate", reason, previous.result)
        if previous.status == GateStatus.FAILED:
            reason = f"not executed: the same request just failed ({previous.reason})"
            return request.refuse(GateStatus.FAILED, "duplicate", reason, previous.result)
        reason = "not executed: the same request is still of unknown outcome"
        return request.refuse(GateStatus.OUTCOME_UNKNOWN, "outcome_unknown", reason)

    async def _begin(self, request: WriteRequest, identity: OperationIdentity,
                     should_proceed: Callable[[], bool] | None) -> GateResult | OperationRecord:
        """The record this call now owns (``executing``), or why its handler is not run."""
        key, refuse = identity.key, request.refuse
        if should_proceed is not None and not should_proceed():
            reason = "not executed: the reply that requested it was interrupted"
            return refuse(GateStatus.NOT_EXECUTED, "interrupted", reason)
        if self._closed:
            return refuse(GateStatus.NOT_EXECUTED, "closed", "not executed: the call is ending")
        slot = f"{identity.call_id}:{identity.resource}" if identity.resource else ""
        if slot and (held := await self._conflict(request, identity, slot)) is not None:
            return held
        lease_until = self.operations.now() + self.lease_secs
        try:
            start = self.operations.start(key, request.name, identity.request_hash, identity.scope, self.owner,
                                          lease_until, slot)
            record, created = await self._own(start, key, 1, lambda started: started[0] if started[1] else None)
        except ResourceBusy:
            return self._busy(request, identity)
        if created:
            return record
        for _ in range(4):
            if record.status == S.EXECUTING:
                if handler_may_run(record, self.operations.now(), self.grace_secs):
                    reason = "not executed: the same request is being carried out; its outcome is not known yet"
                    return refuse(GateStatus.OUTCOME_UNKNOWN, "in_flight", reason)
                record = await self._bounded(self.operations.settle(record, S.OUTCOME_UNKNOWN, error=_OWNER_STOPPED))
            if record.status == S.OUTCOME_UNKNOWN:
                record = await self.reconcile(record, request.evidence)
            if record.status == S.OUTCOME_UNKNOWN:
                self._told_unknown.add(key)
                reason = "not executed: an earlier attempt's outcome is still unknown; it is being checked"
                return refuse(GateStatus.OUTCOME_UNKNOWN, "outcome_unknown", reason)
            if record.status == S.SUCCEEDED:
                return refuse(GateStatus.NOT_EXECUTED, "duplicate", ALREADY_DONE, record.result)
            if record.retryable:
                try:
                    claim = self.operations.claim(record, self.owner, self.operations.now() + self.lease_secs)
                    claimed = await self._own(claim, key, record.attempt + 1)
                except ResourceBusy:
                    return self._busy(request, identity)
                if claimed is not None:
                    return claimed
            record = await self.operations.get(key) or record
        reason = "not executed: the same request is being carried out elsewhere"
        return refuse(GateStatus.OUTCOME_UNKNOWN, "in_flight", reason)

    async def _bounded(self, write: Awaitable[T]) -> T:
        """A ledger write of the gate's own, waited for at most the tool's deadline."""
        return await asyncio.wait_for(write, self.timeout_secs)

    async def _own(self, write: Awaitable[T], key: str, attempt: int,
                   mine: Callable[[T], OperationRecord | None] | None = None) -> T:
        """Run a start or claim of ``attempt`` (:func:`owned`); lost, settle what it may have committed."""
        abandon = functools.partial(self._never_left, mine=mine, key=key, attempt=attempt)
        try:
            return await owned(write, self.timeout_secs, abandon, inline=self.operations.inline)
        except Exception as exc:  # a StoreTimeout was given up on: _never_left follows the write
            if transient(exc) and not isinstance(exc, StoreTimeout):  # the database said no: it may have committed
                await self._settle_lost(key, attempt)
            raise

    def _never_left(self, write: asyncio.Future[Any], mine: Callable[[Any], OperationRecord | None] | None, key: str,
                    attempt: int) -> None:
        """The caller gave up on a start or claim: if it commits, its handler never ran; settle it, off the loop."""

        async def settle() -> None:
            try:
                answer = await write
                record = answer if mine is None else mine(answer)
            except Exception:  # it failed, yet may have committed: read back under the key's lock
                async with self._locked(key):
                    await self._settle_lost(key, attempt)
                return
            if record:
                await retrying(lambda: self._never_ran(record), within_secs=self.settle_retry_secs)

        self._late.watch(settle())

    async def _settle_lost(self, key: str, attempt: int) -> None:
        """A lost start or claim may have committed (its answer lost with the connection): if so, settle it, bounded.

        Under the key's lock: executing at ``attempt`` under this owner, no handler of the key here, it is that write.
        """
        if self.operations.inline:
            return
        with contextlib.suppress(Exception):
            stored = await self._bounded(self.operations.get(key))
            if (stored is not None and not self._handler_keys[key]
                    and (stored.status, stored.owner, stored.attempt) == (S.EXECUTING, self.owner, attempt)):
                await self._bounded(self._never_ran(stored))

    def _never_ran(self, record: OperationRecord) -> Awaitable[OperationRecord]:
        return self.operations.settle(record, S.FAILED, error=_NEVER_LEFT)

    @staticmethod
    def _busy(request: WriteRequest, identity: OperationIdentity) -> GateResult:
        changing = f"another change to {identity.resource} is being carried out; its outcome is not known yet"
        return request.refuse(GateStatus.NOT_EXECUTED, "conflict", f"not executed: {changing}. {_TELL}")

    async def _conflict(self, request: WriteRequest, identity: OperationIdentity, slot: str) -> GateResult | None:
        """Hold a different write on a resource whose earlier write is in flight or of unknown outcome."""
        for other in await self.operations.unsettled_on(f"{identity.call_id}:", slot):
            if other.idempotency_key == identity.key:
                continue
            if other.status == S.EXECUTING and not handler_may_run(other, self.operations.now(), self.grace_secs):
                other = await self._bounded(self.operations.settle(other, S.OUTCOME_UNKNOWN, error=_OWNER_STOPPED))
            if other.status == S.OUTCOME_UNKNOWN:
                self._told_unknown.add(other.idempotency_key)  # whatever it turns out to be, the model hears it
                other = await self.reconcile(other, request.evidence)
            if other.status in (S.EXECUTING, S.OUTCOME_UNKNOWN):
                state = "still being carried out" if other.status == S.EXECUTING else "of unknown outcome"
                self._told_unknown.add(other.idempotency_key)
                request.evidence["conflicts_with"] = other.idempotency_key
                checking = (f"the earlier {other.op_type} on {identity.resource} is {state}; checking whether it went "
                            "through")
                return request.refuse(GateStatus.NOT_EXECUTED, "conflict", f"not executed: {checking}. {_TELL}")
        commit = self._unseen_commits.pop(slot, None)
        if commit is not None and commit.idempotency_key != identity.key:
            request.evidence["conflicts_with"] = commit.idempotency_key
            reason = (f"not executed: the earlier {commit.op_type} on {identity.resource} went through after all "
                      f"(result: {commit.result}); it is done, so change or reschedule it instead of doing it again.")
            return request.refuse(GateStatus.NOT_EXECUTED, "conflict", reason)
        return None

    def stop(self) -> None:
        """Start no more writes; running handlers keep their lease until they return (the owner is released then)."""
        self._closed = True
        if not self._handlers:
            release_owner(self.owner)
