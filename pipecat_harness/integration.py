"""Start-up checks of how a bot wired the harness in: mistakes that would otherwise be silent.

User-aggregator params built without :meth:`Harness.user_params` never hold a turn, and a tool gate with no tools
registered has nothing to act on. The harness logs each problem with its fix, or raises :class:`IntegrationError` when
built with ``strict=True`` (the bots' default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_harness._pipecat import function_registry, user_aggregator_params
from pipecat_harness.control import HarnessControl
from pipecat_harness.errors import InputError

__all__ = ["IntegrationError", "advertised_handler_names", "integration_problems"]


class IntegrationError(InputError):
    """The bot wired the harness in so that an active control cannot act; the message says how to fix it."""


def integration_problems(controls: Sequence[HarnessControl], processors: Sequence[FrameProcessor],
                         user_params: Any | None, *, gated: bool) -> list[str]:
    """What keeps an active control from acting in this pipeline, one sentence (with the fix) per problem.

    Args:
        controls: The call's active controls.
        gated: Whether the tool gate is one of them.
        processors: The bot's processors, as given to :meth:`Harness.place`.
        user_params: The params :meth:`Harness.user_params` returned, or ``None`` if it was never called.
    """
    problems: list[str] = []
    base = HarnessControl.wrap_stop_strategies
    stop_controls = sorted(c.name for c in controls if type(c).wrap_stop_strategies is not base)
    aggregator = next((p for p in processors if isinstance(p, LLMUserAggregator)), None)
    if stop_controls and aggregator is not None:
        if user_params is None or user_aggregator_params(aggregator) is not user_params:
            problems.append(f"{', '.join(stop_controls)} active but the user aggregator was built without "
                            "harness.user_params(); pass LLMContextAggregatorPair(context, "
                            "user_params=harness.user_params(LLMUserAggregatorParams(...)))")
    # Registered tools are gated (or refused as undeclared) by the gate itself; left is a gate with nothing to act on.
    if gated:
        llms = [p for p in processors if isinstance(p, LLMService)]
        registered = [name for llm in llms for name in function_registry(llm) if name is not None]
        if llms and not registered:
            problems.append("tool_gate active but the LLM has no registered tools, so it has nothing to act on; "
                            "register tools with harness.register_function(...) before harness.place(...), or switch "
                            "tool_gate off")
    return problems


def advertised_handler_names(tools: Any) -> list[str]:
    """Names of the handler-carrying tools in a ``ToolsSchema`` or list (direct functions, schemas with handlers)."""
    items = list(getattr(tools, "standard_tools", None) or []) + list(getattr(tools, "direct_functions", None) or [])
    if isinstance(tools, list | tuple):
        items = list(tools)
    names = []
    for tool in items:
        if getattr(tool, "handler", None) is not None and getattr(tool, "name", None):
            names.append(tool.name)
        elif callable(tool) and not hasattr(tool, "properties"):
            names.append(getattr(tool, "name", None) or getattr(tool, "__name__", ""))
        elif hasattr(tool, "function") and hasattr(tool, "name"):  # a DirectFunctionWrapper
            names.append(tool.name)
    return [n for n in names if n]
