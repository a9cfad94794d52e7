"""``ToolGate``: the program, not the model, decides which tool calls are forwarded.

Reads are always forwarded. A write is forwarded unless the same logical operation
(:mod:`pipecat_harness.tools.identity`) already succeeded, is being carried out or has an unknown outcome, a policy
says otherwise, or its arguments are invalid; with an operation ledger this holds across restarts and processes::

    gate = ToolGate(write_tools={"issue_refund"})
    result = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, issue_refund)
    again = await gate.call("issue_refund", {"amount_usd": 45.0, "order_id": "#W1"}, issue_refund)
    assert again.status == "not_executed"       # "not executed: already done"
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from loguru import logger

from pipecat_harness.tools.arguments import ArgumentError, ArgumentNormalizer, prepare_arguments
from pipecat_harness.tools.canonical import CanonicalizationError, request_hash
from pipecat_harness.tools.execution import await_deadline, describe_error, reports_error
from pipecat_harness.tools.identity import OperationIdentity, OperationScope, operation_scope
from pipecat_harness.tools.operation_state import OperationRecord, Reconciler
from pipecat_harness.tools.operations import MemoryOperations, Operations, OperationStore
from pipecat_harness.tools.policy import PolicySet, PolicyVerdict, ToolRequest
from pipecat_harness.tools.result import GateResult, GateStatus
from pipecat_harness.tools.writes import WriteRunner

__all__ = ["DecisionSink", "GateHandler", "ToolGate"]

GateHandler = Callable[[Mapping[str, Any]], Awaitable[Any]]
"""A framework-free tool handler: arguments mapping in, JSON-serialisable result out."""

_ALLOW = PolicyVerdict("allow")
_ACTIONS = {GateStatus.BLOCKED: "blocked", GateStatus.OUTCOME_UNKNOWN: "outcome_unknown", GateStatus.FAILED: "failed"}


class DecisionSink(Protocol):
    """Where the gate records its decisions (a call's decision log, a trace...)."""

    def record(self, action: str, evidence: dict[str, Any]) -> Any:
        """Record a decision; the return value is passed back to :meth:`outcome`."""

    def outcome(self, decision: Any, outcome: dict[str, Any]) -> None:
        """Attach what followed a decision."""


class ToolGate:
    """Decides, per tool call, whether it is forwarded to its handler (any ``async def handler(arguments)``).

    Nothing raises out of :meth:`call`: bad input is ``blocked``, a store failure before the handler ran is
    ``not_executed``, after it ``outcome_unknown``. ``read_tools`` or ``schemas`` given, other tools are unknown.
    ``normalizers`` give arguments their business-canonical form (``"w2378156"`` is ``"#W2378156"``), which runs and
    identifies duplicates. ``resources`` name what a write changes (``"order #W1"``): a different write on a resource
    whose earlier write is unsettled is held. A handler is never cancelled: past ``timeout_secs`` its outcome is
    unknown, its lease covers ``late_reply_secs``, and its reply, however late, settles the operation. A ``reconciler``
    may answer ``failed`` only for an attempt the backend voided; ``definitive_errors`` are exceptions meaning "no".
    """

    def __init__(self, write_tools: Iterable[str], *, read_tools: Iterable[str] | None = None,
                 schemas: Mapping[str, Mapping[str, Any]] | None = None,
                 normalizers: Mapping[str, ArgumentNormalizer] | None = None,
                 scopes: Mapping[str, OperationScope] | None = None,
                 resources: Mapping[str, Callable[[Mapping[str, Any]], str | None]] | None = None,
                 ledger: OperationStore | None = None, tenant: str = "default", session_id: str | None = None,
                 policies: PolicySet | None = None, server_context: Mapping[str, Any] | None = None,
                 reserved_fields: Iterable[str] = (), timeout_secs: float | None = 10.0, late_reply_secs: float = 300.0,
                 max_argument_bytes: int = 16_384, reconciler: Reconciler | None = None,
                 reconcilers: Mapping[str, Reconciler] | None = None, is_failure: Callable[[Any], bool] = reports_error,
                 definitive_errors: tuple[type[BaseException], ...] = (), decisions: DecisionSink | None = None,
                 settle_retry_secs: float = 120.0) -> None:
        self.write_tools = frozenset(write_tools)
        self.schemas: dict[str, Mapping[str, Any]] = dict(schemas or {})
        self.normalizers: dict[str, ArgumentNormalizer] = dict(normalizers or {})
        self.scopes: dict[str, OperationScope] = dict(scopes or {})
        self.resources: dict[str, Callable[[Mapping[str, Any]], str | None]] = dict(resources or {})
        self.read_tools = frozenset(read_tools or ())
        known = read_tools is not None or schemas is not None
        self.known_tools = frozenset({*self.read_tools, *self.schemas, *self.write_tools}) if known else None
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
        self._operations: Operations = ledger.operations(tenant) if ledger is not None else MemoryOperations(tenant)
        self.writes = WriteRunner(self._operations, self, timeout_secs=timeout_secs, late_reply_secs=late_reply_secs,
                                  is_failure=is_failure, definitive_errors=definitive_errors,
                                  settle_retry_secs=settle_retry_secs)
        self.writes.reconciler = reconciler
        self.writes.reconcilers.update(reconcilers or {})

    @property
    def ledger(self) -> OperationStore | None:
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
        """Start a user turn (``"turn"``-scoped tools may repeat a request as new): the next, or ``turn_id``."""
        self.turn_id = self.turn_id + 1 if turn_id is None else turn_id
        return self.turn_id

    def take_settled(self) -> list[OperationRecord]:
        """Writes the model was told were of unknown outcome that have settled since; each returned once."""
        return self.writes.take_settled()

    async def close(self) -> None:
        """Start no more writes; running handlers go on to their end and settle their records (never cancelled)."""
        self.writes.stop()

    async def call(self, name: str, arguments: Any, handler: GateHandler, *, tool_call_id: str | None = None,
                   context: Mapping[str, Any] | None = None,
                   should_proceed: Callable[[], bool] | None = None) -> GateResult:
        """Decide on one tool call and run it if forwarded; ``result.to_tool_result()`` is what the model receives.

        ``arguments``: a mapping or the model's JSON text; ``context``: trusted, on top of ``server_context``;
        ``should_proceed``: checked right before executing (``False``: the generation issuing it was interrupted).
        """
        write = name in self.write_tools
        evidence: dict[str, Any] = {"tool": str(name)[:128], "write": write, "turn": self.turn_id}
        if tool_call_id:
            evidence["tool_call_id"] = tool_call_id
        try:
            prepared = self._prepare(name, arguments, write, evidence, context)
        except Exception as exc:  # bad input of a kind nobody foresaw: still a clear refusal
            reason = f"invalid arguments: {describe_error(exc)}"
            return self.refuse(GateStatus.BLOCKED, name, write, evidence, "invalid", reason)
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
            error, key = describe_error(exc), evidence.get("idempotency_key")
            logger.warning(f"tool gate could not record {name}: {error}")
            if evidence.get("forwarded", False):  # the handler began: it may have applied the write
                reason = (f"outcome unknown: the tool ran but the operation ledger failed ({error}); the action may or "
                          "may not have happened")
                return self.refuse(GateStatus.OUTCOME_UNKNOWN, name, True, evidence, "store_error", reason, key=key)
            reason = f"not executed: the operation could not be recorded ({error})"
            return self.refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "store_error", reason, key=key)

    def _prepare(self, name: str, arguments: Any, write: bool, evidence: dict[str, Any],
                 context: Mapping[str, Any] | None) -> tuple[dict[str, Any], str] | GateResult:
        if self.known_tools is not None and name not in self.known_tools:
            reason = f"there is no tool named {name!r}"
            return self.refuse(GateStatus.BLOCKED, name, write, evidence, "unknown_tool", reason)
        try:
            final_arguments, normalized = prepare_arguments(
                arguments, max_bytes=self.max_argument_bytes, trusted={**self.server_context, **(context or {})},
                reserved=self.reserved_fields, schema=self.schemas.get(name), normalizer=self.normalizers.get(name))
            if normalized is not None:
                evidence["normalized_arguments"] = normalized
            digest = request_hash(name, final_arguments)
        except (ArgumentError, CanonicalizationError) as exc:
            return self.refuse(GateStatus.BLOCKED, name, write, evidence, getattr(exc, "kind", "invalid"), str(exc))
        evidence["request_hash"] = digest[:16]
        return final_arguments, digest

    async def _run_write(self, name: str, arguments: dict[str, Any], digest: str, handler: GateHandler,
                         evidence: dict[str, Any], should_proceed: Callable[[], bool] | None) -> GateResult:
        verdict, verdicts = _ALLOW, list[PolicyVerdict]()
        if self.policies.rules:
            verdict, verdicts = self.policies.evaluate(ToolRequest(name, arguments, self.turn_id, True))
        if verdicts:
            evidence["policy"] = [{"rule": v.rule, "action": v.action, "reason": v.reason} for v in verdicts]
        if verdict.action == "block":
            return self.refuse(GateStatus.BLOCKED, name, True, evidence, "policy", verdict.reason)
        if verdict.action == "clarify":
            reason = f"not executed: confirm with the caller first ({verdict.reason})"
            return self.refuse(GateStatus.NOT_EXECUTED, name, True, evidence, "clarify", reason)
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
            reason = f"no reply within {self.timeout_secs:g}s"
            result = GateResult(GateStatus.FAILED, name, reason=reason, reason_kind="timeout")
        elif outcome.error is not None:
            result = GateResult(GateStatus.FAILED, name, reason=outcome.error, reason_kind="error")
        elif self.is_failure(outcome.value):
            reason = "the tool reported an error"
            result = GateResult(GateStatus.FAILED, name, outcome.value, reason, reason_kind="reported_error")
        else:
            result = GateResult(GateStatus.EXECUTED, name, outcome.value)
        self.outcome(decision, result)
        return result

    async def reconcile_pending(self) -> list[OperationRecord]:
        """Settle what this call left behind (run on resuming after a restart, and by :meth:`sweep_forever`)."""
        return await self.writes.reconcile_pending(f"{self.session_id}:")

    async def sweep_forever(self, interval_secs: float = 30.0) -> None:
        """Run :meth:`reconcile_pending` every ``interval_secs`` until cancelled (errors are logged)."""
        while True:
            try:
                await self.reconcile_pending()
            except Exception as exc:
                logger.warning(f"tool gate sweep failed ({describe_error(exc)}); retrying")
            await asyncio.sleep(interval_secs)

    def refuse(self, status: GateStatus, name: str, write: bool, evidence: dict[str, Any], kind: str, reason: str, *,
               result: Any = None, key: str | None = None) -> GateResult:
        """Record a refusal and return its result."""
        self.record(_ACTIONS.get(status, "not_executed"), {**evidence, "reason_kind": kind, "reason": reason})
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
            reason = {"reason": result.reason} if result.reason else {}
            self.decisions.outcome(decision, {"status": result.status.value, **reason})
