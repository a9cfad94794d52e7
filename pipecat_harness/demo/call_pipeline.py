"""The retail agent's pipeline, defined once for the bots and the simulator.

``bots/agent.py`` builds it on a real transport with the provider services;
``pipecat-harness simulate`` builds the same thing on a simulated transport,
with either the scripted services or the provider services against the
loopback fakes. Only the ends differ: what feeds the pipeline and what plays
its audio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregator,
    LLMContextAggregatorPair,
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_harness.demo.retail_tools import ToolHandler
from pipecat_harness.harness import Harness
from pipecat_harness.tools.operation_state import OperationRecord, Reconciliation

__all__ = ["CallPipeline", "CallTools", "build_call_pipeline"]


@dataclass
class CallPipeline:
    """The processors of one call and the parts callers reach into."""

    processors: list[FrameProcessor]
    context: LLMContext
    user_aggregator: LLMUserAggregator
    assistant_aggregator: LLMAssistantAggregator


class CallTools(Protocol):
    """What the pipeline needs of a call's tools (:class:`RetailTools` is one)."""

    write_tools: frozenset[str]

    def schemas(self) -> ToolsSchema:
        """The tool schemas for the context."""
        ...

    def handlers(self) -> dict[str, ToolHandler]:
        """The framework-free handlers by tool name."""
        ...

    def argument_normalizers(self) -> Mapping[str, Callable[[dict[str, Any]], Any]]:
        """Per tool, the canonical form of its arguments."""
        ...

    async def reconcile(self, record: OperationRecord) -> Reconciliation | None:
        """What became of a write of unknown outcome."""
        ...

    def register(self, llm: Any, *, wrap: Callable[[str, ToolHandler], ToolHandler] | None = None) -> None:
        """Register every tool straight on the LLM (no harness)."""
        ...


def build_call_pipeline(
    *,
    harness: Harness | None,
    llm: LLMService[Any],
    tts: FrameProcessor,
    output: FrameProcessor,
    tools: CallTools,
    user_params: LLMUserAggregatorParams,
    source: Sequence[FrameProcessor] = (),
    before_output: Sequence[FrameProcessor] = (),
    wrap_handler: Callable[[str, ToolHandler], ToolHandler] | None = None,
) -> CallPipeline:
    """Build the agent's processor list, with the harness placed when given.

    Args:
        harness: The call's harness (``None``: the same pipeline with no controls, a baseline).
        llm: The LLM service; the retail tools are registered on it.
        tts: The TTS service.
        output: The output transport.
        tools: The call's tools on its database (the retail tools, or a simulated scenario's own).
        user_params: The user aggregator's params before the harness wraps them.
        source: What comes first: the transport input and the STT service.
        before_output: Processors right before the output transport (Twilio marks).
        wrap_handler: Wraps each business handler under the tool layer (simulated backend faults).
    """
    context = LLMContext(tools=tools.schemas())
    handlers = tools.handlers()
    if wrap_handler is not None:
        handlers = {name: wrap_handler(name, handler) for name, handler in handlers.items()}
    if harness is not None:
        harness.register_tools(llm, handlers, write_tools=tools.write_tools,
                               normalizers=tools.argument_normalizers(), reconciler=tools.reconcile)
        user_params = harness.user_params(user_params)
    else:
        tools.register(llm, wrap=wrap_handler)
    pair = LLMContextAggregatorPair(context, user_params=user_params)
    user, assistant = pair.user(), pair.assistant()
    processors: list[FrameProcessor] = [*source, user, llm, tts, *before_output, output, assistant]
    if harness is not None:
        processors = harness.place(processors)
    return CallPipeline(processors, context, user, assistant)
