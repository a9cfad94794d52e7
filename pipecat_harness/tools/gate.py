"""``ToolGate``: the program, not the model, decides which tool calls are forwarded.

Framework-free: a handler is any ``async def handler(arguments) -> result``.
Reads are always forwarded. A write is forwarded unless the same logical
operation (:mod:`pipecat_harness.tools.identity`) already succeeded, is being
carried out, or has an unknown outcome; unless a policy says otherwise; and
unless its arguments are invalid::

    gate = ToolGate(write_tools={"issue_refund"})
    result = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, issue_refund)
    again = await gate.call("issue_refund", {"amount_usd": 45.0, "order_id": "#W1"}, issue_refund)
    assert again.status == "not_executed"       # "not executed: already done"

With an :class:`OperationLedger` every logical operation is one record under
one key (the same in every attempt, turn and process), which makes the
guarantees survive a process restart and hold across processes; the write's
life is :mod:`pipecat_harness.tools.writes`. Nothing raises out of
:meth:`ToolGate.call`: bad input is ``blocked``, a store failure before the
handler ran is ``not_executed``, after it ``outcome_unknown``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from loguru import logger

from pipecat_harness.tools.arguments import ArgumentError, ArgumentNormalizer, prepare_arguments
from pipecat_harness.tools.canonical import CanonicalizationError, request_hash
from pipecat_harness.tools.execution import await_deadline, describe_error, reports_error
from pipecat_harness.tools.identity import OperationIdentity, OperationScope, operation_scope
from pipecat_harness.tools.operation_state import OperationRecord, Reconciler
from pipecat_harness.tools.operations import LedgerOperations, MemoryOperations, Operations
from pipecat_harness.tools.policy import PolicySet, PolicyVerdict, ToolRequest
from pipecat_harness.tools.result import GateResult, GateStatus
from pipecat_harness.tools.writes import WriteRunner

if TYPE_CHECKING:
    from pipecat_harness.tools.ledger import OperationLedger

__all__ = ["DecisionSink", "GateHandler", "ToolGate"]


GateHandler = Callable[[Mapping[str, Any]], Awaitable[Any]]
"""A framework-free tool handler: arguments mapping in, JSON-serialisable result out."""


_ALLOW = PolicyVerdict("allow")


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
        scopes: Per write tool, what makes an identical request a new operation
            (``"call"`` by default; see :mod:`pipecat_harness.tools.identity`).
        resources: Per write tool, a function of the arguments naming the
            resource it changes (``"order #W1"``, ``"callback"``); a different
            write on a resource whose earlier write is in flight or unknown is
            held (``not_executed``, kind ``conflict``) until that one is settled.
        ledger: Operation ledger for writes (idempotency across restarts and processes).
        tenant: Tenant of the ledger records.
        session_id: Identifies the call in idempotency keys.
        policies: Rules run before forwarding a write.
        server_context: Trusted fields added to every call's arguments.
        reserved_fields: Further fields the model may never supply.
        timeout_secs: A handler still running after this has an unknown outcome; the
            gate's own ledger writes wait no longer than this either.
        late_reply_secs: How long a timed-out write is expected to go on (its lease
            covers it). The handler is never cancelled: its reply, however late,
            settles the operation (reconciliation by the backend's own answer).
        max_argument_bytes: Largest accepted arguments payload.
        reconciler: Asks the backend for the real outcome of an unknown write
            (``reconcilers`` per tool take precedence). It may answer ``failed``
            only for an attempt the backend voided (``Reconciliation(FAILED,
            voided=record.attempt)``); see :class:`Reconciliation`.
        reconcilers: Per tool, the reconciler.
        is_failure: Tells a returned error from a success (default: ``{"error": ...}``).
        definitive_errors: Exception types a handler raises only when the backend
            said no (besides :class:`OperationRefused`); any other exception is ambiguous.
        decisions: Where decisions are recorded.
        settle_retry_secs: How long an outcome the ledger failed to record is written again
            (in the background, with back-off).
    """

    def __init__(
        self,
        write_tools: Iterable[str],
        *,
        read_tools: Iterable[str] | None = None,
        schemas: Mapping[str, Mapping[str, Any]] | None = None,
        normalizers: Mapping[str, ArgumentNormalizer] | None = None,
        scopes: Mapping[str, OperationScope] | None = None,
        resources: Mapping[str, Callable[[Mapping[str, Any]], str | None]] | None = None,
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
        reconcilers: Mapping[str, Reconciler] | None = None,
        is_failure: Callable[[Any], bool] = reports_error,
        definitive_errors: tuple[type[BaseException], ...] = (),
        decisions: DecisionSink | None = None,
        settle_retry_secs: float = 120.0,
    ) -> None:
        self.write_tools = frozenset(write_tools)
        self.schemas: dict[str, Mapping[str, Any]] = dict(schemas or {})
        self.normalizers: dict[str, ArgumentNormalizer] = dict(normalizers or {})
        self.scopes: dict[str, OperationScope] = dict(scopes or {})
        self.resources: dict[str, Callable[[Mapping[str, Any]], str | None]] = dict(resources or {})
        self.read_tools = frozenset(read_tools or ())
        known = None if read_tools is None and schemas is None else set(self.read_tools) | set(self.schemas)
        self.known_tools: frozenset[str] | None = None if known is None else frozenset(known | self.write_tools)
        self.tenant = tenant
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self.policies = policies or PolicySet()
        self.server_context: dict[str, Any] = dict(server_context or {})
        self.reserved_fields = frozenset(reserved_fields)
        self.timeout_secs = timeout_secs
        self.max_argument_bytes = max_argument_bytes
        self.is_failure = is_failure
        self.decisions = decisions
        self.turn_id = 0
        self._operations: Operations = (
            LedgerOperations(ledger, tenant) if ledger is not None else MemoryOperations(tenant)
        )
        self.writes = WriteRunner(self._operations, self, timeout_secs=timeout_secs, late_reply_secs=late_reply_secs,
                                  is_failure=is_failure, definitive_errors=definitive_errors,
                                  settle_retry_secs=settle_retry_secs)
        self.writes.reconciler = reconciler
        self.writes.reconcilers.update(reconcilers or {})

    @property
    def ledger(self) -> OperationLedger | None:
        """The operation ledger, if writes are recorded in one."""
        return self._operations.ledger

    @property
    def reconciler(self) -> Reconciler | None:
        """The reconciler of tools without their own."""
        return self.writes.reconciler

    @reconciler.setter
    def reconciler(self, value: Reconciler | None) -> None:
        self.writes.reconciler = value

    @property
    def reconcilers(self) -> dict[str, Reconciler]:
        """Reconcilers by tool name."""
        return self.writes.reconcilers

    @property
    def _late(self) -> Any:
        return self.writes.late_replies

    def new_turn(self, turn_id: int | None = None) -> int:
        """Mark a user-turn boundary (``"turn"``-scoped tools may repeat an identical request as new).

        Args:
            turn_id: The new turn's id (default: the next number). A restarted
                process passes the turn it resumes in.
        """
        self.turn_id = self.turn_id + 1 if turn_id is None else turn_id
        return self.turn_id

    def take_settled(self) -> list[OperationRecord]:
        """Writes the model was told were of unknown outcome that have settled since; each returned once."""
        return self.writes.take_settled()

    async def close(self) -> None:
        """Start no more writes; running handlers go on to their end and settle their records (never cancelled)."""
        await self.writes.close()

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
        """Decide on one tool call and run it if it is forwarded. Never raises (except cancellation).

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
        evidence: dict[str, Any] = {"tool": str(name)[:128], "write": write, "turn": self.turn_id}
        if tool_call_id:
            evidence["tool_call_id"] = tool_call_id
        try:
            prepared = self._prepare(name, arguments, write, evidence, context)
        except Exception as exc:  # bad input of a kind nobody foresaw: still a clear refusal
            return self.refuse(GateStatus.BLOCKED, name, write, evidence, "invalid",
                               f"invalid arguments: {describe_error(exc)}")
        if isinstance(prepared, GateResult):
            return prepared
        final_arguments, digest = prepared
        if not write:
            return await self._run_read(name, final_arguments, handler, evidence)
        try:
            return await self._run_write(name, final_arguments, digest, handler, evidence, should_proceed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the gate's own store failed
            logger.warning(f"tool gate could not record {name}: {describe_error(exc)}")
            if evidence.get("forwarded", False):  # the handler began: it may have applied the write
                return self.refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "store_error",
                                   f"outcome unknown: the tool ran but the operation ledger failed "
                                   f"({describe_error(exc)}); the action may or may not have happened",
                                   key=evidence.get("idempotency_key"))
            return self.refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "store_error",
                               f"not executed: the operation could not be recorded ({describe_error(exc)})",
                               key=evidence.get("idempotency_key"))

    def _prepare(self, name: str, arguments: Any, write: bool, evidence: dict[str, Any],
                 context: Mapping[str, Any] | None) -> tuple[dict[str, Any], str] | GateResult:
        if self.known_tools is not None and name not in self.known_tools:
            return self.refuse(GateStatus.BLOCKED, name, write, evidence, "unknown_tool",
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
            return self.refuse(GateStatus.BLOCKED, name, write, evidence, kind, str(exc))
        evidence["request_hash"] = digest[:16]
        return final_arguments, digest

    async def _run_write(self, name: str, arguments: dict[str, Any], digest: str, handler: GateHandler,
                         evidence: dict[str, Any], should_proceed: Callable[[], bool] | None) -> GateResult:
        if self.policies.rules:
            verdict, verdicts = self.policies.evaluate(ToolRequest(name, arguments, self.turn_id, True))
        else:
            verdict, verdicts = _ALLOW, []
        if verdicts:
            evidence["policy"] = [{"rule": v.rule, "action": v.action, "reason": v.reason} for v in verdicts]
        if verdict.action == "block":
            return self.refuse(GateStatus.BLOCKED, name, True, evidence, "policy", verdict.reason)
        if verdict.action == "clarify":
            return self.refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "clarify",
                               f"not executed: confirm with the caller first ({verdict.reason})")
        warnings = tuple(v.reason for v in verdicts if v.action == "warn")
        occurrence = operation_scope(self.scopes.get(name, "call"), arguments, self.turn_id)
        resource_of = self.resources.get(name)
        resource = str(resource_of(arguments) or "")[:256] if resource_of is not None else ""
        identity = OperationIdentity(self.tenant, self.session_id, name, digest, occurrence, resource)
        return await self.writes.run(name, arguments, handler, identity, evidence, warnings, should_proceed)

    async def _run_read(self, name: str, arguments: dict[str, Any], handler: GateHandler,
                        evidence: dict[str, Any]) -> GateResult:
        decision = self.record("forwarded", evidence)
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
        self.outcome(decision, result)
        return result

    async def reconcile_pending(self) -> list[OperationRecord]:
        """Settle what this call left behind.

        Records a gone owner left ``executing`` become ``outcome_unknown``,
        then every unknown write of the call is reconciled.

        Run it when a call resumes after a restart, and periodically (:meth:`sweep_forever`).
        """
        return await self.writes.reconcile_pending(f"{self.session_id}:")

    async def sweep_forever(self, interval_secs: float = 30.0) -> None:
        """Run :meth:`reconcile_pending` every ``interval_secs`` until cancelled (errors are logged)."""
        while True:
            try:
                await self.reconcile_pending()
            except Exception as exc:
                logger.warning(f"tool gate sweep failed ({describe_error(exc)}); retrying")
            await asyncio.sleep(interval_secs)

    # -- decisions (the write runner reports through these) ---------------------

    def refuse(self, status: GateStatus, name: str, write: bool, evidence: dict[str, Any], kind: str,
               reason: str, *, result: Any = None, key: str | None = None) -> GateResult:
        """Record a refusal and return its result."""
        action = {GateStatus.BLOCKED: "blocked", GateStatus.OUTCOME_UNKNOWN: "outcome_unknown",
                  GateStatus.FAILED: "failed"}.get(status, "not_executed")
        self.record(action, {**evidence, "reason_kind": kind, "reason": reason})
        return GateResult(status, str(name), result, reason, write=write, idempotency_key=key, reason_kind=kind)

    @property
    def recording(self) -> bool:
        """Whether decisions go anywhere (evidence is only assembled for a sink)."""
        return self.decisions is not None

    def record(self, action: str, evidence: dict[str, Any]) -> Any:
        """Record a decision in the sink, if any."""
        return self.decisions.record(action, evidence) if self.decisions is not None else None

    def outcome(self, decision: Any, result: GateResult) -> None:
        """Attach a result to a recorded decision."""
        if self.decisions is not None and decision is not None:
            outcome: dict[str, Any] = {"status": result.status.value}
            if result.reason:
                outcome["reason"] = result.reason
            self.decisions.outcome(decision, outcome)
