"""The retail agent's pipeline, defined once for the bots and the simulator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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

from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, ToolHandler, pipecat_function
from pipecat_harness.harness import Harness

__all__ = ["CallPipeline", "build_call_pipeline"]


@dataclass
class CallPipeline:
    """The processors of one call and the parts callers reach into."""

    processors: list[FrameProcessor]
    context: LLMContext
    user_aggregator: LLMUserAggregator
    assistant_aggregator: LLMAssistantAggregator


def build_call_pipeline(*, harness: Harness | None, llm: LLMService[Any], tts: FrameProcessor, output: FrameProcessor,
                        tools: RetailTools, user_params: LLMUserAggregatorParams, source: Sequence[FrameProcessor] = (),
                        before_output: Sequence[FrameProcessor] = (),
                        wrap_handler: Callable[[str, ToolHandler], ToolHandler] | None = None,
                        extra_tools: Sequence[Any] = (),
                        extra_write_tools: frozenset[str] = frozenset()) -> CallPipeline:
    """Build the agent's processor list, with the harness placed when given.

    Args:
        harness: The call's harness (``None``: the same pipeline with no controls, a baseline).
        llm: The LLM service; the retail tools are registered on it.
        tts: The TTS service.
        output: The output transport.
        tools: The retail tools on the call's database.
        user_params: The user aggregator's params before the harness wraps them.
        source: What comes first: the transport input and the STT service.
        before_output: Processors right before the output transport (Twilio marks).
        wrap_handler: Wraps each business handler under the tool layer (simulated backend faults).
        extra_tools: Further tool sets (``schemas()``, ``handlers()``, ``argument_normalizers()``), e.g. callbacks.
        extra_write_tools: Which of their tools change business state.
    """
    schemas = list(tools.schemas().standard_tools)
    handlers, normalizers = tools.handlers(), tools.argument_normalizers()
    extra_handlers: dict[str, ToolHandler] = {}
    for tool_set in extra_tools:
        schemas.extend(tool_set.schemas())
        extra_handlers.update(tool_set.handlers())
        normalizers.update(tool_set.argument_normalizers())
    context = LLMContext(tools=ToolsSchema(standard_tools=schemas))
    if wrap_handler is not None:
        handlers = {name: wrap_handler(name, handler) for name, handler in handlers.items()}
        extra_handlers = {name: wrap_handler(name, handler) for name, handler in extra_handlers.items()}
    if harness is not None:
        harness.register_tools(llm, {**handlers, **extra_handlers}, write_tools=RETAIL_WRITE_TOOLS | extra_write_tools,
                               normalizers=normalizers, reconciler=tools.reconcile, resources=tools.resources())
        user_params = harness.user_params(user_params)
    else:
        tools.register(llm, wrap=wrap_handler)
        for name, handler in extra_handlers.items():
            llm.register_function(name, pipecat_function(handler), cancel_on_interruption=name not in extra_write_tools)
    assistant_params = harness.assistant_params() if harness is not None else None
    pair = LLMContextAggregatorPair(context, user_params=user_params, assistant_params=assistant_params)
    user, assistant = pair.user(), pair.assistant()
    processors: list[FrameProcessor] = [*source, user, llm, tts, *before_output, output, assistant]
    if harness is not None:
        processors = harness.place(processors)
    return CallPipeline(processors, context, user, assistant)
