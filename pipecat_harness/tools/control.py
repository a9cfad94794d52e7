"""``ToolGateControl``: the tool gate inside a Pipecat pipeline.

Execution happens inside the LLM service, so the gate wraps each handler at
registration (``Harness.register_function`` / ``wrap_registered_functions``).
The wrapped handler asks the :class:`ToolGate` whether to forward the call,
runs the original Pipecat handler if so, and always answers the
``tool_call_id`` through ``params.result_callback`` — with the handler's own
result, or with a clear "not executed" / "blocked" / "outcome unknown" result.

A small processor after the user aggregator (:class:`GenerationGuard`) watches
interruptions, so that a call from a generation that was interrupted before
the call was issued is not executed, and notes calls of tools that were never
registered.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.adapters.llm.schemas.direct_function import DirectFunctionWrapper
from pipecat.frames.frames import (
    Frame,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMContextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams

from pipecat_harness.control import HarnessControl, PipecatHandler, Placement
from pipecat_harness.decisions import ControlDecision
from pipecat_harness.tools.arguments import ArgumentNormalizer
from pipecat_harness.tools.execution import describe_error
from pipecat_harness.tools.gate import ToolGate
from pipecat_harness.tools.ledger import OperationLedger

if TYPE_CHECKING:
    from pipecat_harness.harness import Harness

__all__ = ["GenerationGuard", "ToolGateControl"]



class GenerationGuard(FrameProcessor):
    """Tracks whether the current generation was interrupted, and which calls were issued.

    A generation starts when a context reaches the LLM after a user turn or
    after tool results. An interruption after that start and before a call's
    handler runs means the call came from an interrupted generation, unless
    the LLM had already announced the call (``FunctionCallsStartedFrame``).

    Args:
        on_unknown_tool: Called with ``(name, tool_call_id)`` for announced calls
            of tools the gate never wrapped.
    """

    def __init__(self, on_unknown_tool: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self.interruptions = 0
        self._mark = 0
        self._issued: set[str] = set()
        self._on_unknown_tool = on_unknown_tool

    def may_run(self, tool_call_id: str) -> bool:
        """Whether a call may execute: announced, or no interruption since its generation started."""
        return tool_call_id in self._issued or self.interruptions == self._mark

    def generation_started(self) -> None:
        """Mark the start of a generation (tests and non-pipeline callers)."""
        self._mark = self.interruptions

    def interrupted(self) -> None:
        """Note an interruption."""
        self.interruptions += 1

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Watch frames; forward all of them unchanged."""
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            self.interrupted()
        elif isinstance(frame, LLMContextFrame | FunctionCallResultFrame):
            self.generation_started()
        elif isinstance(frame, FunctionCallsStartedFrame):
            for call in frame.function_calls:
                self._issued.add(call.tool_call_id)
                if self._on_unknown_tool is not None:
                    self._on_unknown_tool(call.function_name, call.tool_call_id)
        await self.push_frame(frame, direction)


class _DecisionAdapter:
    """Routes the gate's decisions into the call's decision log."""

    def __init__(self, control: ToolGateControl) -> None:
        self._control = control

    def record(self, action: str, evidence: dict[str, Any]) -> ControlDecision:
        return self._control.record(action, evidence)  # type: ignore[no-any-return]

    def outcome(self, decision: ControlDecision, outcome: dict[str, Any]) -> None:
        self._control.harness.decisions.set_outcome(decision, outcome)


class ToolGateControl(HarnessControl):
    """Forward tool calls through a :class:`ToolGate`; every call still gets a result.

    Configured by ``HarnessConfig.tool_gate``. Trusted code may set
    ``control.gate.server_context`` (tenant id, customer id), add policy rules
    to ``control.gate.policies`` and set ``control.gate.reconciler``.
    """

    name = "tool_gate"

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)
        settings = harness.config.tool_gate
        self.ledger: OperationLedger | None = (
            OperationLedger(settings.ledger_url, table_prefix=settings.ledger_table_prefix)
            if settings.ledger_url else None
        )
        self._ledger_ready = asyncio.Lock()
        self._ledger_created = False
        self.gate = ToolGate(
            write_tools=set(harness.write_tools),
            ledger=self.ledger,
            tenant=settings.tenant,
            session_id=harness.call_id,
            reserved_fields=settings.server_context_fields,
            timeout_secs=settings.handler_timeout_secs,
            late_reply_secs=settings.late_reply_secs,
            max_argument_bytes=settings.max_argument_bytes,
            decisions=_DecisionAdapter(self),
        )
        self.guard = GenerationGuard(on_unknown_tool=self._check_known)
        self._wrapped: set[str] = set()

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The generation guard, right after the user aggregator."""
        return [(Placement.BEFORE_LLM, self.guard)]

    def on_user_turn(self, turn_id: int, text: str) -> None:
        """A new user turn: identical writes may run again."""
        self.gate.new_turn(turn_id)

    def set_argument_normalizer(self, name: str, normalizer: ArgumentNormalizer) -> None:
        """Compare and run ``name``'s calls in their canonical form."""
        self.gate.normalizers[name] = normalizer

    def wrap_function(self, name: str, handler: PipecatHandler, *, write: bool) -> PipecatHandler:
        """Return a handler that asks the gate before running ``handler``."""
        writes = set(self.gate.write_tools)
        writes.add(name) if write else writes.discard(name)
        self.gate.write_tools = frozenset(writes)
        self._wrapped.add(name)

        async def gated(params: FunctionCallParams) -> None:
            await self._ensure_ledger()
            try:
                result = await self.gate.call(
                    params.function_name or name,
                    params.arguments,
                    lambda arguments: _run_pipecat_handler(handler, params, arguments),
                    tool_call_id=params.tool_call_id,
                    should_proceed=lambda: self.guard.may_run(params.tool_call_id),
                )
                payload = result.to_tool_result()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the gate's own storage failed: answer the call, never crash the loop
                logger.exception(f"tool gate failed on {name}")
                self.record("failed", {"tool": name, "tool_call_id": params.tool_call_id,
                                       "reason": describe_error(exc)})
                payload = {"status": "failed", "reason": f"the tool could not be run: {describe_error(exc)}"}
            await params.result_callback(payload)

        gated.__name__ = f"gated_{name}"
        return gated

    async def _ensure_ledger(self) -> None:
        if self.ledger is None or self._ledger_created:
            return
        async with self._ledger_ready:
            if not self._ledger_created:
                await self.ledger.create_tables()
                self._ledger_created = True

    def _check_known(self, name: str, tool_call_id: str) -> None:
        if name not in self._wrapped:
            self.record("blocked", {"tool": name, "tool_call_id": tool_call_id, "reason_kind": "unknown_tool",
                                    "reason": f"no tool named {name!r} is registered through the harness"})


async def _run_pipecat_handler(handler: Any, params: FunctionCallParams, arguments: Mapping[str, Any]) -> Any:
    """Run a Pipecat handler and return the final result it reports.

    Intermediate updates (``is_final=False``) pass straight through; the
    final result is captured so the gate can decide what the model receives.
    """
    final: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def capture(result: Any, *, properties: Any = None) -> None:
        if properties is not None and not getattr(properties, "is_final", True):
            await params.result_callback(result, properties=properties)
        elif not final.done():
            final.set_result(result)

    inner = dataclasses.replace(params, arguments=dict(arguments), result_callback=capture)
    if isinstance(handler, DirectFunctionWrapper):
        await handler.invoke(args=dict(arguments), params=inner)
    else:
        await handler(inner)
    return await final
