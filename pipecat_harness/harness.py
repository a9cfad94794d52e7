"""``Harness``: builds the configured controls and places them in a Pipecat pipeline.

Adding the harness to an existing bot takes four calls::

    harness = Harness(HarnessConfig.preset("retail"), call_id=call_id)
    user_agg, assistant_agg = LLMContextAggregatorPair(
        context, user_params=harness.user_params(LLMUserAggregatorParams(...))
    )
    harness.register_function(llm, "issue_refund", issue_refund, write=True)
    pipeline = Pipeline(harness.place([transport.input(), stt, user_agg, llm, tts,
                                       transport.output(), assistant_agg]))
    worker = PipelineWorker(pipeline, observers=harness.observers())
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from loguru import logger
from pipecat.observers.base_observer import BaseObserver
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregatorParams,
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.turns.user_turn_strategies import UserTurnStrategies, default_user_turn_stop_strategies

from pipecat_harness._pipecat import function_registry
from pipecat_harness.config import HarnessConfig
from pipecat_harness.control import HarnessControl, PipecatHandler, Placement, ToolHandler, pipecat_function
from pipecat_harness.decisions import DecisionLog
from pipecat_harness.errors import import_or_name_extra
from pipecat_harness.events import CallEvents
from pipecat_harness.integration import IntegrationError, advertised_handler_names, integration_problems
from pipecat_harness.observer_group import ObserverGroup
from pipecat_harness.placement import TurnBoundaryProcessor, flatten, insert_placed
from pipecat_harness.tools.operation_state import Reconciler
from pipecat_harness.trace.recorder import TraceRecorder
from pipecat_harness.turn_strategies import TurnStrategyAdvisor

if TYPE_CHECKING:
    from pipecat_harness.tools.control import ToolGateControl

__all__ = ["CONTROLS", "CONTROL_FACTORIES", "Harness", "TurnBoundaryProcessor"]


#: The controls, by name, with the ``"module:Class"`` of each (imported only when enabled), in the one
#: order they are built in: the order of their processors at one placement, of their stop-strategy
#: wrappers (a later one wraps an earlier one) and of their tool-handler wrappers (the tool gate, last,
#: is outermost: it decides whether a call runs at all).
CONTROLS: tuple[tuple[str, str], ...] = (
    ("identifier_hold", "pipecat_harness.input.control:IdentifierHoldControl"),
    ("silent_reply", "pipecat_harness.input.control:SilentReplyControl"),
    ("spelling", "pipecat_harness.input.control:SpellingControl"),
    ("call_state", "pipecat_harness.business.control:CallStateControl"),
    ("checklist", "pipecat_harness.checklist.control:ChecklistControl"),
    ("grader", "pipecat_harness.grader.control:GraderControl"),
    ("history", "pipecat_harness.history.control:HistoryControl"),
    ("tool_gate", "pipecat_harness.tools.control:ToolGateControl"),
)

#: Control name -> ``"module:Class"`` (:data:`CONTROLS` as a mapping, in the same order).
CONTROL_FACTORIES: dict[str, str] = dict(CONTROLS)


class Harness:
    """The configured controls for one call.

    Args:
        config: The configuration (defaults: :class:`HarnessConfig` from the environment).
        call_id: Identifier of the call (a random one when omitted).
        trace_path: JSONL file for the call's timeline (``<config.trace.directory>/<call_id>.jsonl`` when tracing).
        trace_metadata: Extra fields for the trace header.
        write_tools: Names of tools that change business state, in addition to ``config.tool_gate.write_tools``.
        strict: Raise :class:`~pipecat_harness.integration.IntegrationError` from :meth:`place` when an active control
            cannot act (a tool registered without the harness, user params not from :meth:`user_params`, a tool gate
            with no tools); otherwise each problem is logged as an error with its fix.
    """

    #: Place the processors of one placement as one :class:`~pipecat_harness.placement.PlacementGroup`
    #: (``False``: one by one, as ``scripts/bench_pipeline.py`` compares).
    grouped: bool = True

    def __init__(self, config: HarnessConfig | None = None, *, call_id: str | None = None,
                 trace_path: str | Path | None = None, trace_metadata: dict[str, Any] | None = None,
                 write_tools: Iterable[str] = (), strict: bool = False) -> None:
        self.config = config or HarnessConfig()
        self.strict = strict
        self._user_params: LLMUserAggregatorParams | None = None
        self.call_id = call_id or uuid.uuid4().hex[:12]
        self.decisions = DecisionLog(self.call_id)
        self.events = CallEvents()
        self.write_tools = set(self.config.tool_gate.write_tools) | set(write_tools)
        self.recorder: TraceRecorder | None = None
        if self.config.trace.enabled:
            path = trace_path or Path(self.config.trace.directory) / f"{self.call_id}.jsonl"
            metadata = {"controls": sorted(self.active_controls_from_config()), **(trace_metadata or {})}
            self.recorder = TraceRecorder(path, call_id=self.call_id, decisions=self.decisions, metadata=metadata)
        self.controls: list[HarnessControl] = self._build_controls()
        self._advise_turn_strategies = False
        self._turn_strategy_defaults: UserTurnStrategies | None = None
        self._user_turn_stop_timeout = LLMUserAggregatorParams().user_turn_stop_timeout

    def active_controls_from_config(self) -> frozenset[str]:
        """Controls the config switches on and that this installation provides."""
        return frozenset(n for n in self.config.enabled_controls() if n in CONTROL_FACTORIES)

    @property
    def active_controls(self) -> frozenset[str]:
        """Names of the controls built for this call."""
        return frozenset(control.name for control in self.controls)

    def control(self, name: str) -> HarnessControl | None:
        """Return the built control with that name, if active."""
        return next((c for c in self.controls if c.name == name), None)

    def _build_controls(self) -> list[HarnessControl]:
        controls = []
        active = self.active_controls_from_config()
        for name in [name for name in CONTROL_FACTORIES if name in active]:
            module_name, _, class_name = CONTROL_FACTORIES[name].partition(":")
            factory = getattr(import_or_name_extra(module_name, f"control {name!r}"), class_name)
            controls.append(factory(self))
        self._gate = cast("ToolGateControl | None", next((c for c in controls if c.name == "tool_gate"), None))
        if self._gate is not None:
            for control in controls:
                control.bind_gate(self._gate)
        return controls

    def user_params(self, params: LLMUserAggregatorParams | None = None) -> LLMUserAggregatorParams:
        """Return user-aggregator params with the controls' stop-strategy wrappers applied.

        Strategies the bot passes are wrapped in place. When it passes none, the params stay empty so the aggregator
        still adopts what an STT service recommends (Deepgram Flux); :meth:`place` then adds a
        :class:`~pipecat_harness.turn_strategies.TurnStrategyAdvisor` that wraps Pipecat's defaults and every
        recommendation on their way in. With no control that wraps stop strategies, the params are returned unchanged.
        A control may raise ``user_turn_stop_timeout`` so its wait fits inside the turn watchdog.

        Args:
            params: The params the bot would use without the harness.
        """
        params = params or LLMUserAggregatorParams()
        self._user_params = params
        if not any(type(c).wrap_stop_strategies is not HarnessControl.wrap_stop_strategies for c in self.controls):
            return params
        provided = params.user_turn_strategies
        original = list(provided.stop or []) if provided is not None else default_user_turn_stop_strategies()
        wrapped = self._wrap_stop_strategies(original)
        if len(wrapped) == len(original) and all(a is b for a, b in zip(wrapped, original, strict=True)):
            return params
        for control in self.controls:
            control.fit_turn_watchdog(params, wrapped)
        if provided is not None:
            provided.stop = wrapped
        else:
            self._turn_strategy_defaults = UserTurnStrategies(stop=wrapped)
        self._user_turn_stop_timeout = params.user_turn_stop_timeout
        self._advise_turn_strategies = True
        return params

    def _wrap_stop_strategies(self, strategies: list[Any]) -> list[Any]:
        stop = list(strategies)
        for control in self.controls:
            stop = control.wrap_stop_strategies(stop)
        return stop

    def _wrap_recommended(self, strategies: list[Any]) -> list[Any]:
        wrapped = self._wrap_stop_strategies(strategies)
        for control in self.controls:
            control.fit_turn_watchdog(LLMUserAggregatorParams(user_turn_stop_timeout=self._user_turn_stop_timeout),
                                      wrapped, adjust=False)
        return wrapped

    def place(self, processors: list[FrameProcessor]) -> list[FrameProcessor]:
        """Insert the controls' processors into a pipeline's processor list.

        Positions are found by type: the ``LLMUserAggregator``, the ``LLMService``, the ``BaseOutputTransport`` and the
        ``LLMAssistantAggregator``; a missing anchor is an error, never a processor placed somewhere wrong. The
        processors of one placement stand in the list as one :class:`~pipecat_harness.placement.PlacementGroup` (one
        hop per frame; :func:`~pipecat_harness.placement.flatten` lists its members), and the trace recorder, if any,
        listens to the processors directly. Then checks that every active control can act
        (:mod:`pipecat_harness.integration`): each problem is logged as an error with its fix, or raised under
        ``strict``.

        Raises:
            ValueError: A required anchor is missing from ``processors``.
            IntegrationError: Under ``strict``, an active control cannot act.
        """
        placed: dict[Placement, list[FrameProcessor]] = {p: [] for p in Placement}
        for placement, processor in (item for control in self.controls for item in control.processors()):
            placed[placement].append(processor)
        placed[Placement.BEFORE_LLM].insert(0, TurnBoundaryProcessor(self._on_user_turn, decisions=self.decisions))
        if self._advise_turn_strategies:
            advisor = TurnStrategyAdvisor(self._wrap_recommended, self._turn_strategy_defaults)
            placed[Placement.BEFORE_USER_AGGREGATOR].append(advisor)

        for processor in (p for p in processors if isinstance(p, LLMService)):
            # Start-up is where an undeclared tool must fail, loudly, not mid-call.
            context = next((p.context for p in processors if isinstance(p, LLMUserAggregator)), None)
            self.wrap_registered_functions(processor, tools=getattr(context, "tools", None))
        problems = integration_problems(self.controls, processors, self._user_params, gated=self._gate is not None)
        if problems and self.strict:
            raise IntegrationError("; ".join(problems))
        for problem in problems:
            logger.error(f"pipecat-harness: {problem}")
        owners = ", ".join(sorted({c.name for c in self.controls})) or "the harness"
        result = insert_placed(processors, placed, owners, grouped=self.grouped)
        for control in self.controls:
            control.on_pipeline(flatten(result))
        if self.recorder is not None:
            self.recorder.listen(flatten(result), entry=processors[0] if processors else None)
        return result

    def assistant_params(self, params: LLMAssistantAggregatorParams | None = None) -> LLMAssistantAggregatorParams:
        """Return assistant-aggregator params with the controls' settings (context budget) applied."""
        params = params or LLMAssistantAggregatorParams()
        for control in self.controls:
            params = control.assistant_params(params)
        return params

    def register_function(self, llm: LLMService, name: str, handler: PipecatHandler, *, write: bool | None = None,
                          normalize: Callable[[dict[str, Any]], Any] | None = None,
                          reconciler: Reconciler | None = None,
                          resource: Callable[[Mapping[str, Any]], str | None] | None = None, **options: Any) -> None:
        """Register a Pipecat handler with every control's wrapper applied.

        Writes default to ``cancel_on_interruption=False``: a barge-in must not cancel a write halfway through.

        Args:
            llm: The LLM service.
            name: Tool name.
            handler: ``async def handler(params: FunctionCallParams)``.
            write: Whether the tool changes business state (default: listed in ``write_tools``).
            normalize: Gives the tool's arguments their business-canonical form, so that the same request said two
                ways is one request.
            reconciler: Asks the backend what became of this tool's writes of unknown outcome (see
                :class:`~pipecat_harness.tools.ToolGate`).
            resource: Names what a write changes; a different write on the same resource is held while an earlier one
                is in flight or unknown.
            **options: Passed to ``llm.register_function``.
        """
        gate_control = self._gate
        declared = gate_control.declared_write(name) if gate_control is not None else None
        if write is None and name in self.write_tools:
            write = True
        if write is None and declared is None and gate_control is not None:
            raise gate_control.undeclared_error(name)
        is_write = bool(declared if write is None else write)
        if is_write:
            self.write_tools.add(name)
            options.setdefault("cancel_on_interruption", False)
        wrapped = handler
        for control in self.controls:
            if normalize is not None:
                control.set_argument_normalizer(name, normalize)
            wrapped = control.wrap_function(name, wrapped, write=is_write)
        if reconciler is not None and gate_control is not None:
            gate_control.gate.reconcilers[name] = reconciler
        if resource is not None and gate_control is not None:
            gate_control.gate.resources[name] = resource
        self._attach(llm)
        llm.register_function(name, wrapped, **options)

    def register_tools(self, llm: LLMService, handlers: Mapping[str, ToolHandler], *, write_tools: Iterable[str] = (),
                       normalizers: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
                       reconciler: Reconciler | None = None,
                       resources: Mapping[str, Callable[[Mapping[str, Any]], str | None]] | None = None) -> None:
        """Register framework-free handlers (arguments mapping in, result out).

        Args:
            llm: The LLM service.
            handlers: Handlers by tool name.
            write_tools: Which of them change business state.
            normalizers: Per tool, the canonical form of its arguments (see :meth:`register_function`).
            reconciler: Answers for the write tools' operations of unknown outcome.
            resources: Per write tool, what it changes (see :meth:`register_function`).
        """
        writes = set(write_tools)
        for name, handler in handlers.items():
            # The caller lists the writes; every other handler given here is a read.
            is_write = name in writes or name in self.write_tools
            self.register_function(llm, name, pipecat_function(handler), write=is_write,
                                   normalize=(normalizers or {}).get(name),
                                   reconciler=reconciler if is_write else None,
                                   resource=(resources or {}).get(name) if is_write else None)

    def wrap_registered_functions(self, llm: LLMService, tools: Any = None) -> None:
        """Gate every handler of ``llm``, already registered or registered later, however registered.

        Direct functions and ``FunctionSchema(handler=...)`` tools that Pipecat registers at the first model run, and
        tools added after start, are gated when Pipecat stores them. Wrapping twice is a no-op.

        Args:
            llm: The LLM service.
            tools: The tools the context advertises (a ``ToolsSchema`` or list); each handler-carrying one must be
                declared a read or a write.

        Raises:
            ValueError: A registered or advertised tool is declared neither a read nor a write.
        """
        self._attach(llm)
        for name, item in list(function_registry(llm).items()):
            if name in self.write_tools and item.cancel_on_interruption:
                item.cancel_on_interruption = False  # a barge-in must not cancel a write
        gate_control = self._gate
        if gate_control is None:
            return
        for name in [name for name in function_registry(llm) if name is not None] + advertised_handler_names(tools):
            if gate_control.declared_write(name) is None:
                raise gate_control.undeclared_error(name)

    def _attach(self, llm: Any) -> None:
        control = self._gate
        if control is not None:
            control.attach(llm)
        else:
            for other in self.controls:  # controls that wrap handlers without the gate (tests, probes)
                registry = function_registry(llm)
                for name, item in list(registry.items()):
                    if name is None or getattr(item.handler, "_harness_wrapped", False):
                        continue
                    wrapped = other.wrap_function(name, item.handler, write=name in self.write_tools)
                    if wrapped is not item.handler:
                        setattr(wrapped, "_harness_wrapped", True)  # noqa: B010
                        item.handler = wrapped

    def observers(self) -> list[BaseObserver]:
        """Return the observers to add to the worker: one group of the controls' observers and the recorder.

        The controls' observers come first and the trace recorder last (``observers()[0].members``); one group costs
        the voice loop one observer queue per frame instead of one per observer.
        """
        members: list[BaseObserver] = [observer for control in self.controls for observer in control.observers()]
        if self.recorder is not None and not self.recorder.listening:
            members.append(self.recorder)
        return [ObserverGroup(members)] if members else []

    def close(self) -> None:
        """End the call's controls (the tool gate starts no more writes) and flush the trace."""
        for control in self.controls:
            control.end_call()
        if self.recorder is not None:
            self.recorder.close()

    def _on_user_turn(self, text: str) -> None:
        turn_id = self.decisions.next_turn()
        for control in self.controls:
            control.on_user_turn(turn_id, text)
