"""Start-up checks of how a bot wired the harness in: mistakes that would otherwise be silent.

A control listed as active does nothing when the bot bypasses it: a tool
registered straight on the LLM is never gated, user-aggregator params built
without :meth:`Harness.user_params` never hold a turn, and a tool gate with no
tools registered has nothing to act on. :func:`integration_problems` finds
these in the processors given to :meth:`Harness.place`; the harness logs each
as an error with the fix, or raises :class:`IntegrationError` when built with
``strict=True`` (the bots' default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_harness.control import HarnessControl
from pipecat_harness.errors import InputError

if TYPE_CHECKING:
    from pipecat_harness.harness import Harness

__all__ = ["WRAPPED_MARK", "IntegrationError", "integration_problems", "mark_wrapped"]

#: Attribute set on a handler the harness wrapped (so a second wrap and the checks can tell).
WRAPPED_MARK = "_harness_wrapped"


class IntegrationError(InputError):
    """The bot wired the harness in so that an active control cannot act; the message says how to fix it."""


def mark_wrapped(handler: Any) -> Any:
    """Mark a handler as wrapped by the harness and return it."""
    try:
        setattr(handler, WRAPPED_MARK, True)
    except (AttributeError, TypeError):  # a builtin or a slotted callable: checks treat it as unwrapped
        pass
    return handler


def _wraps_stop_strategies(control: HarnessControl) -> bool:
    return type(control).wrap_stop_strategies is not HarnessControl.wrap_stop_strategies


def _wraps_functions(control: HarnessControl) -> bool:
    return type(control).wrap_function is not HarnessControl.wrap_function


def integration_problems(harness: Harness, processors: Sequence[FrameProcessor],
                         user_params: Any | None) -> list[str]:
    """What keeps an active control from acting in this pipeline, one sentence (with the fix) per problem.

    Args:
        harness: The harness.
        processors: The bot's processors, as given to :meth:`Harness.place`.
        user_params: The params :meth:`Harness.user_params` returned, or ``None`` if it was never called.
    """
    problems: list[str] = []
    stop_controls = sorted(c.name for c in harness.controls if _wraps_stop_strategies(c))
    aggregator = next((p for p in processors if isinstance(p, LLMUserAggregator)), None)
    if stop_controls and aggregator is not None:
        applied = user_params is not None and getattr(aggregator, "_params", None) is user_params
        if not applied:
            problems.append(
                f"{', '.join(stop_controls)} active but the user aggregator was built without harness.user_params(); "
                "pass LLMContextAggregatorPair(context, user_params=harness.user_params(LLMUserAggregatorParams(...)))"
            )
    tool_controls = sorted(c.name for c in harness.controls if _wraps_functions(c))
    if tool_controls:
        llms = [p for p in processors if isinstance(p, LLMService)]
        registered = {name: item for llm in llms for name, item in getattr(llm, "_functions", {}).items()
                      if name is not None}
        ungated = sorted(name for name, item in registered.items() if not getattr(item.handler, WRAPPED_MARK, False))
        for name in ungated:
            problems.append(
                f"tool '{name}' is registered on the LLM without the harness, so {', '.join(tool_controls)} never "
                f"sees it; register it with harness.register_function(llm, '{name}', handler) or call "
                "harness.wrap_registered_functions(llm) before harness.place(...)"
            )
        if llms and not registered:
            problems.append(
                f"{', '.join(tool_controls)} active but the LLM has no registered tools, so it has nothing to act "
                "on; register tools with harness.register_function(...) before harness.place(...), or switch "
                f"{tool_controls[0]} off"
            )
    return problems
