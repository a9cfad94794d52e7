"""``ToolGateControl``: the tool gate inside a Pipecat pipeline.

:meth:`ToolGateControl.attach` swaps the LLM service's function registry for one that gates every entry however it
is registered (``register_function``, direct functions, ``FunctionSchema(handler=...)``, ``LLMSetToolsFrame``), once.
A tool declared neither a read nor a write is refused at registration, or answered ``blocked`` if it appears mid-call.
Every ``tool_call_id`` is answered: with the handler's result and ``FunctionCallResultProperties`` unchanged, or with a
"not executed" / "blocked" / "outcome unknown" result. Writes are async tools (``cancel_on_interruption=False``); a
write cancelled all the same stays ``outcome_unknown`` until its late reply settles it, which the
:class:`~pipecat_harness.tools.guard.GenerationGuard` tells the model at the next generation.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from loguru import logger
from pipecat.adapters.llm.schemas.direct_function import DirectFunctionWrapper
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import FunctionCallParams, LLMService

from pipecat_harness._pipecat import function_registry, replace_function_registry
from pipecat_harness.control import HarnessControl, PipecatHandler, Placement
from pipecat_harness.decisions import ControlDecision
from pipecat_harness.events import GateDecided
from pipecat_harness.stores import open_store
from pipecat_harness.tools.arguments import ArgumentNormalizer
from pipecat_harness.tools.execution import describe_error
from pipecat_harness.tools.gate import ToolGate
from pipecat_harness.tools.guard import GenerationGuard
from pipecat_harness.tools.operation_state import OperationRecord
from pipecat_harness.tools.result import GateResult

if TYPE_CHECKING:
    from pipecat_harness.control import ControlHost
    from pipecat_harness.tools.operations import OperationStore

__all__ = ["GATED_MARK", "GateHook", "GatedRegistry", "GenerationGuard", "ToolGateControl", "UndeclaredTool"]

#: Attribute set on every gated handler; a marked handler is never wrapped again.
GATED_MARK = "_harness_gated"


class UndeclaredTool(ValueError):
    """A tool was registered that is declared neither a read nor a write."""


class GateHook(Protocol):
    """Trusted code around every gated call (``ToolGateControl.hook``): before the gate decides, what the model gets.

    ``render``'s default is :meth:`GateResult.to_tool_result`.
    """

    async def before_call(self, name: str) -> None:
        """Prepare for the gate's decision on a call of ``name``."""

    async def render(self, result: GateResult) -> Any:
        """Return the tool result the model receives for ``result``."""


class ToolGateControl(HarnessControl):
    """Forward tool calls through a :class:`ToolGate`; every call still gets a result (``HarnessConfig.tool_gate``).

    Trusted code may set ``gate.server_context`` (tenant id, customer id), ``gate.policies``, ``gate.reconciler`` and
    ``hook`` (a :class:`GateHook`; the ``call_state`` control installs one).
    """

    name = "tool_gate"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        settings = harness.config.tool_gate
        self.ledger: OperationStore | None = open_store(
            "operation_ledger", "tool_gate.ledger_url", settings.ledger_url,
            table_prefix=settings.ledger_table_prefix) if settings.ledger_url else None
        self._ledger_ready = asyncio.Lock()
        self._ledger_created = False
        self.gate = ToolGate(write_tools=set(harness.write_tools), ledger=self.ledger, tenant=settings.tenant,
                             session_id=harness.call_id, reserved_fields=settings.server_context_fields,
                             timeout_secs=settings.handler_timeout_secs, late_reply_secs=settings.late_reply_secs,
                             max_argument_bytes=settings.max_argument_bytes, decisions=self)
        self.read_tools: set[str] = set(settings.read_tools)
        self.guard = GenerationGuard(on_unknown_tool=self._check_known, notices=self.take_notices,
                                     on_lifecycle=self._lifecycle)
        self._sweeper: asyncio.Task[None] | None = None
        self._wrapped: set[str] = set()
        self._entry_cache: dict[str, tuple[Any, PipecatHandler]] = {}
        self.hook: GateHook | None = None

    def record(self, action: str, evidence: dict[str, Any] | None = None) -> ControlDecision:
        """Record a gate decision and publish it as :class:`~pipecat_harness.events.GateDecided`."""
        decision: ControlDecision = super().record(action, evidence)
        self.harness.events.publish(GateDecided(decision))
        return decision

    def outcome(self, decision: ControlDecision, outcome: dict[str, Any]) -> None:
        """Attach what followed a gate decision (the gate's :class:`~pipecat_harness.tools.gate.DecisionSink`)."""
        self.harness.decisions.set_outcome(decision, outcome)
        self.harness.events.publish(GateDecided(decision, outcome=True))

    #: How often the sweeper settles what this call left behind (a crashed process's records, unknown outcomes).
    sweep_interval_secs = 30.0

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The generation guard, right after the user aggregator."""
        return [(Placement.BEFORE_LLM, self.guard)]

    def _lifecycle(self, started: bool) -> None:
        if not started:
            self._stop_sweeper()
        elif self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="tool-gate-sweeper")

    def _stop_sweeper(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def _sweep(self) -> None:
        """Settle what the call left behind when it starts (a restarted call), then every ``sweep_interval_secs``."""
        try:
            await self._ensure_ledger()
        except Exception as exc:
            logger.warning(f"tool gate sweeper could not open the ledger: {describe_error(exc)}")
        await self.gate.sweep_forever(self.sweep_interval_secs)

    def end_call(self) -> None:
        """The call ended (``Harness.close``): the gate starts no more writes; running handlers go on and settle."""
        self._stop_sweeper()
        self.gate.writes.stop()

    @property
    def sweeping(self) -> bool:
        """Whether the sweeper runs (from the pipeline's start to its end)."""
        return self._sweeper is not None and not self._sweeper.done()

    def on_user_turn(self, turn_id: int, text: str) -> None:
        """A new user turn: identical writes may run again."""
        self.gate.new_turn(turn_id)

    def set_argument_normalizer(self, name: str, normalizer: ArgumentNormalizer) -> None:
        """Compare and run ``name``'s calls in their canonical form."""
        self.gate.normalizers[name] = normalizer

    def declare(self, name: str, *, write: bool) -> None:
        """Declare ``name`` a write (deduplicated, recorded) or a read tool."""
        self.gate.write_tools = self.gate.write_tools | {name} if write else self.gate.write_tools - {name}
        self.read_tools.discard(name) if write else self.read_tools.add(name)

    def declared_write(self, name: str) -> bool | None:
        """``True`` for a declared write, ``False`` for a read, ``None`` when undeclared."""
        return True if name in self.gate.write_tools else False if name in self.read_tools else None

    def undeclared_error(self, name: str) -> UndeclaredTool:
        """The error for a tool declared neither a read nor a write."""
        return UndeclaredTool(f"tool {name!r} is declared neither a read nor a write: register it with "
                              f"harness.register_function(..., write=True) or write=False, or list it in "
                              f"tool_gate.write_tools or tool_gate.read_tools (an undeclared write would never be "
                              f"deduplicated)")

    def wrap_function(self, name: str, handler: PipecatHandler, *, write: bool) -> PipecatHandler:
        """Return a handler that asks the gate before running ``handler`` (a gated handler is returned as is)."""
        if getattr(handler, GATED_MARK, False):
            return handler
        self.declare(name, write=write)
        self._wrapped.add(name)

        async def gated(params: FunctionCallParams) -> None:
            if self.declared_write(name) is None:  # appeared mid-call, never declared: refuse, loudly
                logger.error(str(self.undeclared_error(name)))
                self.record("blocked", {"tool": name, "tool_call_id": params.tool_call_id,
                                        "reason_kind": "undeclared_tool", "reason": str(self.undeclared_error(name))})
                await params.result_callback({"status": "blocked", "reason": f"the tool {name!r} is not available"})
                return
            captured: dict[str, Any] = {}
            await self._ensure_ledger()
            try:
                if self.hook is not None:
                    await self.hook.before_call(name)
                result = await self.gate.call(
                    params.function_name or name, params.arguments,
                    lambda arguments: _run_pipecat_handler(handler, params, arguments, captured),
                    tool_call_id=params.tool_call_id, should_proceed=lambda: self.guard.may_run(params.tool_call_id))
                payload = result.to_tool_result() if self.hook is None else await self.hook.render(result)
                properties = captured.get("properties") if result.executed else None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # defensive: the gate answers every call, this must not crash the loop
                logger.exception(f"tool gate failed on {name}")
                self.record("outcome_unknown", {"tool": name, "tool_call_id": params.tool_call_id,
                                                "reason": describe_error(exc)})
                payload = {"status": "outcome_unknown", "reason": f"the tool could not be run: {describe_error(exc)}"}
                properties = None
            await params.result_callback(payload, **({"properties": properties} if properties is not None else {}))

        gated.__name__ = f"gated_{name}"
        setattr(gated, GATED_MARK, True)
        return gated

    def attach(self, llm: Any) -> None:
        """Gate every handler ``llm`` holds or will hold, however it is registered (idempotent)."""
        registry = function_registry(llm) if isinstance(llm, LLMService) else None
        if registry is not None and not isinstance(registry, GatedRegistry):
            replace_function_registry(llm, GatedRegistry(self, registry))

    def gate_entry(self, name: str | None, item: Any) -> Any:
        """Return a registry entry whose handler is gated (entries already gated pass unchanged)."""
        handler = getattr(item, "handler", None)
        if name is None or handler is None or getattr(handler, GATED_MARK, False):
            return item
        cached = self._entry_cache.get(name)
        if cached is not None and cached[0] is _unwrapped(handler):
            return dataclasses.replace(item, handler=cached[1])
        write = self.declared_write(name)
        gated = self.wrap_function(name, handler, write=bool(write))
        if write is None:  # registered without a declaration: refuse its calls until it is declared
            self.gate.write_tools = self.gate.write_tools - {name}
            self.read_tools.discard(name)
            logger.error(str(self.undeclared_error(name)))
        self._entry_cache[name] = (_unwrapped(handler), gated)
        return dataclasses.replace(item, handler=gated)

    def take_notices(self) -> list[str]:
        """System notes on writes that settled after the model was told their outcome was unknown."""
        return [_notice(record) for record in self.gate.take_settled()]

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


class GatedRegistry(dict[str | None, Any]):
    """An ``LLMService`` function registry that gates every entry stored in it."""

    def __init__(self, control: ToolGateControl, entries: Mapping[str | None, Any]) -> None:
        super().__init__()
        self._control = control
        for name, item in entries.items():
            self[name] = item

    def __setitem__(self, name: str | None, item: Any) -> None:
        super().__setitem__(name, self._control.gate_entry(name, item))


def _unwrapped(handler: Any) -> Any:
    return handler.function if isinstance(handler, DirectFunctionWrapper) else handler


def _notice(record: OperationRecord) -> str:
    outcome = "went through" if record.status == "succeeded" else "did not go through"
    detail = record.result if record.result is not None else record.error
    return (f"Update on an earlier {record.op_type} whose outcome was unknown: it {outcome} "
            f"(result: {detail}). Tell the caller if it matters; do not repeat it.")


async def _run_pipecat_handler(handler: Any, params: FunctionCallParams, arguments: Mapping[str, Any],
                               captured: dict[str, Any]) -> Any:
    """Run a Pipecat handler and return its final result (its properties kept in ``captured``; updates pass through)."""
    final: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def capture(result: Any, *, properties: Any = None) -> None:
        if properties is not None and not getattr(properties, "is_final", True):
            await params.result_callback(result, properties=properties)
        elif not final.done():
            if properties is not None:
                captured["properties"] = properties
            final.set_result(result)

    inner = dataclasses.replace(params, arguments=dict(arguments), result_callback=capture)
    if isinstance(handler, DirectFunctionWrapper):
        await handler.invoke(args=dict(arguments), params=inner)
    else:
        await handler(inner)
    return await final
