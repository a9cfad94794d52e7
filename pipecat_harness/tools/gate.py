"""``ToolGate``: the program, not the model, decides which tool calls are forwarded.

Framework-free: a handler is any ``async def handler(arguments) -> result``.
Reads are always forwarded. A write is forwarded unless the identical write
(same name, canonical arguments) already succeeded in this turn, its outcome
is still unknown, a policy says otherwise, or its arguments are invalid::

    gate = ToolGate(write_tools={"issue_refund"})
    result = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, issue_refund)
    again = await gate.call("issue_refund", {"amount_usd": 45.0, "order_id": "#W1"}, issue_refund)
    assert again.status == "not_executed"       # "not executed: already done in this turn"
    gate.new_turn()

With an :class:`OperationLedger` every write is an operation record whose key
is derived from the session, turn, tool and request hash (plus an attempt
number, so a failed write can be retried under a new key), which makes the
guarantees survive a process restart.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from loguru import logger

from pipecat_harness.tools.arguments import ArgumentError, ArgumentNormalizer, prepare_arguments
from pipecat_harness.tools.canonical import CanonicalizationError, request_hash
from pipecat_harness.tools.execution import LateReplies, await_deadline, reports_error, start_handler
from pipecat_harness.tools.ledger import OperationLedger, OperationRecord, OperationStatus, Reconciler
from pipecat_harness.tools.operations import LedgerOperations, MemoryOperations, Operations
from pipecat_harness.tools.policy import PolicySet, ToolRequest
from pipecat_harness.tools.result import ALREADY_DONE, GateResult, GateStatus

__all__ = ["DecisionSink", "GateHandler", "ToolGate"]


GateHandler = Callable[[Mapping[str, Any]], Awaitable[Any]]
"""A framework-free tool handler: arguments mapping in, JSON-serialisable result out."""

class DecisionSink(Protocol):
    """Where the gate records its decisions (a call's decision log, a trace...)."""

    def record(self, action: str, evidence: dict[str, Any]) -> Any:
        """Record a decision; the return value is passed back to :meth:`outcome`."""

    def outcome(self, decision: Any, outcome: dict[str, Any]) -> None:
        """Attach what followed a decision."""


class ToolGate:
    """Decides, per tool call, whether it is forwarded to its handler.

    Args:
        write_tools: Names of the tools that change business state.
        read_tools: Names of the read tools. When given (or ``schemas`` is),
            any other tool name is blocked as unknown.
        schemas: Parameter schemas by tool name; arguments are validated before forwarding.
        normalizers: Per tool, a function giving the arguments' business-canonical form
            (``"w2378156"`` and ``"#W2378156"`` are one order); the canonical form is
            what runs and what identifies a duplicate.
        ledger: Operation ledger for writes (idempotency across restarts).
        tenant: Tenant of the ledger records.
        session_id: Identifies the conversation in idempotency keys.
        policies: Rules run before forwarding a write.
        server_context: Trusted fields added to every call's arguments.
        reserved_fields: Further fields the model may never supply.
        timeout_secs: A handler still running after this has an unknown outcome.
        late_reply_secs: How long a timed-out write keeps running; a reply within
            it settles the operation (reconciliation by the backend's own answer).
        max_argument_bytes: Largest accepted arguments payload.
        reconciler: Asks the backend for the real outcome of an unknown write.
        is_failure: Tells a returned error from a success (default: ``{"error": ...}``).
        decisions: Where decisions are recorded.
    """

    def __init__(
        self,
        write_tools: Iterable[str],
        *,
        read_tools: Iterable[str] | None = None,
        schemas: Mapping[str, Mapping[str, Any]] | None = None,
        normalizers: Mapping[str, ArgumentNormalizer] | None = None,
        ledger: OperationLedger | None = None,
        tenant: str = "default",
        session_id: str | None = None,
        policies: PolicySet | None = None,
        server_context: Mapping[str, Any] | None = None,
        reserved_fields: Iterable[str] = (),
        timeout_secs: float | None = 10.0,
        late_reply_secs: float = 300.0,
        max_argument_bytes: int = 16_384,
        reconciler: Reconciler | None = None,
        is_failure: Callable[[Any], bool] = reports_error,
        decisions: DecisionSink | None = None,
    ) -> None:
        self.write_tools = frozenset(write_tools)
        self.schemas: dict[str, Mapping[str, Any]] = dict(schemas or {})
        self.normalizers: dict[str, ArgumentNormalizer] = dict(normalizers or {})
        known = None if read_tools is None and schemas is None else set(read_tools or ()) | set(self.schemas)
        self.known_tools: frozenset[str] | None = None if known is None else frozenset(known | self.write_tools)
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self.policies = policies or PolicySet()
        self.server_context: dict[str, Any] = dict(server_context or {})
        self.reserved_fields = frozenset(reserved_fields)
        self.timeout_secs = timeout_secs
        self.max_argument_bytes = max_argument_bytes
        self.reconciler = reconciler
        self.is_failure = is_failure
        self.decisions = decisions
        self.turn_id = 0
        self._operations: Operations = (
            LedgerOperations(ledger, tenant) if ledger is not None else MemoryOperations(tenant)
        )
        self._late = LateReplies(late_reply_secs)
        self._done: dict[str, GateResult] = {}
        self._failures: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Call-wide, not per turn: writes still running, and unknown outcomes
        # settled since the model was told "unknown".
        self._inflight: dict[tuple[str, str], tuple[int, asyncio.Future[GateResult]]] = {}
        self._confirmed: dict[tuple[str, str], OperationRecord] = {}

    @property
    def ledger(self) -> OperationLedger | None:
        """The operation ledger, if writes are recorded in one."""
        return self._operations.ledger

    def new_turn(self, turn_id: int | None = None) -> int:
        """Mark a user-turn boundary: identical writes may run again in the new turn.

        Args:
            turn_id: The new turn's id (default: the next number). A restarted
                process passes the turn it resumes in.
        """
        self.turn_id = self.turn_id + 1 if turn_id is None else turn_id
        self._done.clear()
        self._failures.clear()
        self._locks.clear()
        return self.turn_id

    async def close(self) -> None:
        """Stop waiting for late replies of timed-out writes."""
        await self._late.close()

    async def call(
        self,
        name: str,
        arguments: Any,
        handler: GateHandler,
        *,
        tool_call_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        should_proceed: Callable[[], bool] | None = None,
    ) -> GateResult:
        """Decide on one tool call and run it if it is forwarded.

        Args:
            name: Tool name.
            arguments: A mapping, or the raw JSON text the model produced.
            handler: Runs the tool with the final arguments.
            tool_call_id: The model's id of the call (for the decision record).
            context: Trusted server context for this call, on top of ``server_context``.
            should_proceed: Checked right before executing; ``False`` means the
                generation that issued the call was interrupted, and the call is
                not executed.

        Returns:
            The :class:`GateResult`; ``result.to_tool_result()`` is what the model should receive.
        """
        write = name in self.write_tools
        evidence: dict[str, Any] = {"tool": name, "write": write, "turn": self.turn_id}
        if tool_call_id:
            evidence["tool_call_id"] = tool_call_id
        if self.known_tools is not None and name not in self.known_tools:
            return self._refuse(GateStatus.BLOCKED, name, write, evidence, "unknown_tool",
                                f"there is no tool named {name!r}")
        try:
            final_arguments, normalized = prepare_arguments(
                arguments, max_bytes=self.max_argument_bytes, trusted={**self.server_context, **(context or {})},
                reserved=self.reserved_fields, schema=self.schemas.get(name), normalizer=self.normalizers.get(name),
            )
            if normalized is not None:
                evidence["normalized_arguments"] = normalized
            digest = request_hash(name, final_arguments)
        except (ArgumentError, CanonicalizationError) as exc:
            kind = exc.kind if isinstance(exc, ArgumentError) else "invalid"
            return self._refuse(GateStatus.BLOCKED, name, write, evidence, kind, str(exc))
        evidence["request_hash"] = digest[:16]
        if not write:
            return await self._run_read(name, final_arguments, handler, evidence)

        verdict, verdicts = self.policies.evaluate(ToolRequest(name, final_arguments, self.turn_id, write))
        if verdicts:
            evidence["policy"] = [{"rule": v.rule, "action": v.action, "reason": v.reason} for v in verdicts]
        if verdict.action == "block":
            return self._refuse(GateStatus.BLOCKED, name, write, evidence, "policy", verdict.reason)
        if verdict.action == "clarify":
            return self._refuse(GateStatus.NOT_EXECUTED, name, write, evidence, "clarify",
                                f"not executed: confirm with the caller first ({verdict.reason})")
        warnings = tuple(v.reason for v in verdicts if v.action == "warn")

        earlier = self._inflight.get((name, digest))
        if earlier is not None and earlier[0] != self.turn_id:
            # The same write from an earlier turn is still running (the caller
            # barged in and the model asked again): wait for it, do not start another.
            previous = await asyncio.shield(earlier[1])
            if previous.status == GateStatus.EXECUTED:
                return self._refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate",
                                    "not executed: the same request was already in progress and is done",
                                    result=previous.result, key=previous.idempotency_key)
            if previous.status == GateStatus.OUTCOME_UNKNOWN:
                return self._refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "outcome_unknown",
                                    "not executed: the same request is still of unknown outcome",
                                    key=previous.idempotency_key)

        scope = f"{self.session_id}:{self.turn_id}:{name}:{digest}"
        lock = self._locks.setdefault(scope, asyncio.Lock())
        async with lock:
            return await self._write(name, final_arguments, handler, digest, scope, evidence, warnings,
                                     should_proceed)

    async def _run_read(self, name: str, arguments: dict[str, Any], handler: GateHandler,
                        evidence: dict[str, Any]) -> GateResult:
        decision = self._record("forwarded", evidence)
        task = asyncio.ensure_future(handler(arguments))
        try:
            outcome = await await_deadline(task, self.timeout_secs)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if outcome.timed_out:
            outcome.task.cancel()  # a read has no effect to wait for
            result = GateResult(GateStatus.FAILED, name, reason=f"no reply within {self.timeout_secs:g}s",
                                reason_kind="timeout")
        elif outcome.error is not None:
            result = GateResult(GateStatus.FAILED, name, reason=outcome.error, reason_kind="error")
        elif self.is_failure(outcome.value):
            result = GateResult(GateStatus.FAILED, name, outcome.value, "the tool reported an error",
                                reason_kind="reported_error")
        else:
            result = GateResult(GateStatus.EXECUTED, name, outcome.value)
        self._outcome(decision, result)
        return result

    async def _write(
        self,
        name: str,
        arguments: dict[str, Any],
        handler: GateHandler,
        digest: str,
        scope: str,
        evidence: dict[str, Any],
        warnings: tuple[str, ...],
        should_proceed: Callable[[], bool] | None,
    ) -> GateResult:
        done = self._done.get(scope)
        if done is not None:
            return self._refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate", ALREADY_DONE,
                                result=done.result, key=done.idempotency_key)
        confirmed = self._confirmed.pop((name, digest), None)
        if confirmed is not None and confirmed.status == OperationStatus.SUCCEEDED:
            self._done[scope] = GateResult(GateStatus.EXECUTED, name, confirmed.result, write=True,
                                           idempotency_key=confirmed.idempotency_key)
            return self._refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate",
                                "not executed: already done (confirmed after an unknown outcome)",
                                result=confirmed.result, key=confirmed.idempotency_key)
        unknown = await self._operations.unknown(self.session_id, name, digest)
        for record in unknown:
            settled = await self._reconcile(record, evidence)
            if settled.status == OperationStatus.OUTCOME_UNKNOWN:
                return self._refuse(
                    GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "outcome_unknown",
                    "not executed: the same request is still of unknown outcome", key=settled.idempotency_key)
            if settled.status == OperationStatus.SUCCEEDED:
                self._done[scope] = GateResult(GateStatus.EXECUTED, name, settled.result, write=True,
                                               idempotency_key=settled.idempotency_key)
                return self._refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate",
                                    "not executed: already done (confirmed after an unknown outcome)",
                                    result=settled.result, key=settled.idempotency_key)

        record = await self._operations.begin(scope, name, digest, self._failures.get(scope, 0))
        if record.status == OperationStatus.SUCCEEDED:  # done before a restart
            self._done[scope] = GateResult(GateStatus.EXECUTED, name, record.result, write=True,
                                           idempotency_key=record.idempotency_key)
            return self._refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "duplicate", ALREADY_DONE,
                                result=record.result, key=record.idempotency_key)
        if record.status == OperationStatus.OUTCOME_UNKNOWN:
            return self._refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "outcome_unknown",
                                "not executed: an earlier attempt's outcome is unknown", key=record.idempotency_key)
        evidence["idempotency_key"] = record.idempotency_key
        self._failures[scope] = record.attempt
        if should_proceed is not None and not should_proceed():
            await self._operations.cancel(record, "the generation was interrupted before the call was issued")
            return self._refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "interrupted",
                                "not executed: the reply that requested it was interrupted", key=record.idempotency_key)
        running = await self._operations.claim(record)
        if running is None:
            return self._refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "in_flight",
                                "not executed: the same request is being executed elsewhere",
                                key=record.idempotency_key)

        decision = self._record("forwarded", {**evidence, "attempt": record.attempt, "warnings": list(warnings)})
        finished: asyncio.Future[GateResult] = asyncio.get_running_loop().create_future()
        self._inflight[(name, digest)] = (self.turn_id, finished)
        try:
            result = await self._execute(name, arguments, handler, running, scope, evidence, warnings, decision)
        except BaseException:
            finished.set_result(GateResult(GateStatus.OUTCOME_UNKNOWN, name, write=True,
                                           idempotency_key=running.idempotency_key))
            raise
        finally:
            if self._inflight.get((name, digest), (None, None))[1] is finished:
                del self._inflight[(name, digest)]
        finished.set_result(result)
        return result

    async def _execute(
        self,
        name: str,
        arguments: dict[str, Any],
        handler: GateHandler,
        running: OperationRecord,
        scope: str,
        evidence: dict[str, Any],
        warnings: tuple[str, ...],
        decision: Any,
    ) -> GateResult:
        task = start_handler(handler, arguments, running)
        try:
            outcome = await await_deadline(task, self.timeout_secs)
        except asyncio.CancelledError:
            # Cancelled from outside (a framework deadline, the call ending):
            # the write keeps running and its reply, if any, settles it.
            await asyncio.shield(self._operations.settle(
                running, OperationStatus.OUTCOME_UNKNOWN, error="the call was cancelled while the tool ran"))
            self._late.watch(task, lambda value, error: self._late_reply(running, value, error))
            raise
        key = running.idempotency_key
        if outcome.timed_out:
            await self._operations.settle(running, OperationStatus.OUTCOME_UNKNOWN,
                                          error=f"no reply within {self.timeout_secs:g}s")
            self._late.watch(task, lambda value, error: self._late_reply(running, value, error))
            result = GateResult(GateStatus.OUTCOME_UNKNOWN, name, reason=(
                f"outcome unknown: no reply within {self.timeout_secs:g}s; the action may or may not have happened"),
                write=True, idempotency_key=key, warnings=warnings, reason_kind="timeout")
            self._outcome(decision, result)
            self._record("outcome_unknown", {**evidence, "reason": result.reason})
            return result
        if outcome.error is not None:
            await self._operations.settle(running, OperationStatus.FAILED, error=outcome.error)
            self._failures[scope] = running.attempt + 1
            result = GateResult(GateStatus.FAILED, name, reason=f"the tool failed: {outcome.error}", write=True,
                                idempotency_key=key, warnings=warnings, reason_kind="error")
        elif self.is_failure(outcome.value):
            await self._operations.settle(running, OperationStatus.FAILED, result=outcome.value,
                                          error="the tool reported an error")
            self._failures[scope] = running.attempt + 1
            result = GateResult(GateStatus.FAILED, name, outcome.value, "the tool reported an error", write=True,
                                idempotency_key=key, warnings=warnings, reason_kind="reported_error")
        else:
            await self._operations.settle(running, OperationStatus.SUCCEEDED, result=outcome.value)
            result = GateResult(GateStatus.EXECUTED, name, outcome.value, write=True, idempotency_key=key,
                                warnings=warnings)
            self._done[scope] = result
        self._outcome(decision, result)
        return result

    async def _late_reply(self, record: OperationRecord, value: Any, error: str | None) -> None:
        if error is None and not self.is_failure(value):
            status, result, reason = OperationStatus.SUCCEEDED, value, None
        else:
            status, result, reason = OperationStatus.FAILED, value, error or "the tool reported an error"
        stored = await self._operations.settle_unknown(record, status, result=result, error=reason)
        self._confirmed[(stored.op_type, stored.request_hash)] = stored
        self._record("reconciled", {"tool": record.op_type, "idempotency_key": record.idempotency_key,
                                    "status": stored.status.value, "source": "late_reply"})

    async def _reconcile(self, record: OperationRecord, evidence: dict[str, Any]) -> OperationRecord:
        if self.reconciler is None:
            return record
        try:
            settled = await self._operations.reconcile(record, self.reconciler)
        except Exception as exc:  # the backend could not answer: still unknown
            logger.warning(f"reconciliation of {record.idempotency_key} failed: {exc}")
            return record
        if settled.status != OperationStatus.OUTCOME_UNKNOWN:
            self._confirmed[(settled.op_type, settled.request_hash)] = settled
            self._record("reconciled", {**evidence, "idempotency_key": record.idempotency_key,
                                        "status": settled.status.value, "source": "reconciler"})
        return settled

    async def reconcile_pending(self) -> list[OperationRecord]:
        """Ask the reconciler about every write of this session whose outcome is unknown."""
        settled = []
        for record in await self._operations.unknown(self.session_id, None, None):
            settled.append(await self._reconcile(record, {"tool": record.op_type}))
        return settled

    def _refuse(self, status: GateStatus, name: str, write: bool, evidence: dict[str, Any], kind: str,
                reason: str, *, result: Any = None, key: str | None = None) -> GateResult:
        action = {GateStatus.BLOCKED: "blocked", GateStatus.OUTCOME_UNKNOWN: "outcome_unknown"}.get(
            status, "not_executed")
        self._record(action, {**evidence, "reason_kind": kind, "reason": reason})
        return GateResult(status, name, result, reason, write=write, idempotency_key=key, reason_kind=kind)

    def _record(self, action: str, evidence: dict[str, Any]) -> Any:
        return self.decisions.record(action, evidence) if self.decisions is not None else None

    def _outcome(self, decision: Any, result: GateResult) -> None:
        if self.decisions is not None and decision is not None:
            outcome: dict[str, Any] = {"status": result.status.value}
            if result.reason:
                outcome["reason"] = result.reason
            self.decisions.outcome(decision, outcome)
