"""``HarnessControl``: how a control plugs into a Pipecat pipeline.

A control may contribute to four places only: the user aggregator's turn stop strategies (``wrap_stop_strategies``),
processors at a named position (``processors``), tool handlers wrapped at registration (``wrap_function``, after
``set_argument_normalizer`` for tools whose arguments have a canonical form) and read-only observers (``observers``).
It is told of each submitted user turn (``on_user_turn``) before the model runs for it, and meets the tool gate, the one
collaborator another control provides, through ``bind_gate``: it never looks other controls up by name. Every hook has
a do-nothing default, so a control implements only what it needs.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pipecat.observers.base_observer import BaseObserver
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import FunctionCallParams

if TYPE_CHECKING:
    from pipecat_harness.config import HarnessConfig
    from pipecat_harness.decisions import DecisionLog
    from pipecat_harness.events import CallEvents
    from pipecat_harness.trace.recorder import TraceRecorder

__all__ = ["ControlHost", "HarnessControl", "PipecatHandler", "Placement", "ToolHandler", "find_downstream",
           "pipecat_function"]

PipecatHandler = Callable[[FunctionCallParams], Awaitable[None]]
"""A Pipecat function-call handler."""

ToolHandler = Callable[[Mapping[str, Any]], Awaitable[Any]]
"""A framework-free tool handler: arguments mapping in, JSON-serialisable result out."""


def pipecat_function(handler: ToolHandler) -> PipecatHandler:
    """Adapt a framework-free handler to Pipecat's ``FunctionCallParams`` signature.

    Exceptions propagate, so Pipecat reports a failed call as it would for any handler.
    """

    async def call(params: FunctionCallParams) -> None:
        result = await handler(dict(params.arguments))
        await params.result_callback(result)

    call.__name__ = getattr(handler, "__name__", "tool")
    return call


class Placement(enum.Enum):
    """Where a control's processor sits in the pipeline."""

    BEFORE_USER_AGGREGATOR = "before_user_aggregator"
    """Between STT and the user aggregator (transcript rewriting)."""
    BEFORE_LLM = "before_llm"
    """Between the user aggregator and the LLM (per-turn directives)."""
    AFTER_OUTPUT_TRANSPORT = "after_output_transport"
    """Between the output transport and the assistant aggregator (what was played)."""
    AFTER_ASSISTANT_AGGREGATOR = "after_assistant_aggregator"
    """After the assistant aggregator committed (history correction)."""


class ControlHost(Protocol):
    """What a control sees of the call it belongs to (:class:`~pipecat_harness.harness.Harness` provides it)."""

    config: HarnessConfig
    call_id: str
    decisions: DecisionLog
    events: CallEvents
    recorder: TraceRecorder | None
    write_tools: set[str]


class HarnessControl:
    """Base class of a switchable control.

    Args:
        harness: The harness the control belongs to (config, call id, decisions).
    """

    #: The control's name in configs, decisions and ``eval --toggle``.
    name: str = ""

    def __init__(self, harness: ControlHost) -> None:
        self.harness = harness

    def record(self, action: str, evidence: dict[str, Any] | None = None) -> Any:
        """Record a decision of this control in the call's decision log."""
        return self.harness.decisions.record(self.name, action, evidence)

    def bind_gate(self, gate: HarnessControl) -> None:
        """Meet the call's tool gate (called once every control is built, when the gate is active)."""

    def wrap_stop_strategies(self, strategies: list[Any]) -> list[Any]:
        """Return the user-turn stop strategies to use instead of ``strategies``."""
        return strategies

    def fit_turn_watchdog(self, params: Any, strategies: list[Any], *, adjust: bool = True) -> None:
        """Make this control's stop-strategy wrappers in ``strategies`` fit ``params.user_turn_stop_timeout``.

        Args:
            params: The user aggregator's params (``LLMUserAggregatorParams``).
            strategies: The wrapped stop strategies.
            adjust: Whether the control may raise ``params.user_turn_stop_timeout`` (not once the aggregator exists).
        """

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """Return processors to insert, with their placement."""
        return []

    def wrap_function(self, name: str, handler: PipecatHandler, *, write: bool) -> PipecatHandler:
        """Return the handler to register for tool ``name`` instead of ``handler``."""
        return handler

    def set_argument_normalizer(self, name: str, normalizer: Callable[[dict[str, Any]], Any]) -> None:
        """Learn how tool ``name``'s arguments are made canonical (called before :meth:`wrap_function`)."""

    def observers(self) -> list[BaseObserver]:
        """Return read-only observers to add to the worker."""
        return []

    def assistant_params(self, params: Any) -> Any:
        """Return the assistant aggregator's params to use instead of ``params``."""
        return params

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Called with the placed processor list (to attach to a processor's events)."""

    def on_user_turn(self, turn_id: int, text: str) -> None:
        """Called when a user turn is submitted, before the model runs for it."""

    def end_call(self) -> None:
        """Called by :meth:`Harness.close` when the call ends (stop starting work, let running work settle)."""


_P = TypeVar("_P", bound=FrameProcessor)


def find_downstream(processor: FrameProcessor, kind: type[_P]) -> _P | None:
    """The first processor of type ``kind`` after ``processor`` in its pipeline (linked once it started)."""
    current = processor.next
    while current is not None:
        if isinstance(current, kind):
            return current
        current = current.next
    return None
