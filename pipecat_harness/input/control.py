"""The input controls (``identifier_hold``, ``spelling``, ``silent_reply``) as switchable harness controls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import default_user_turn_stop_strategies

from pipecat_harness.control import HarnessControl, Placement
from pipecat_harness.input.hold_budget import required_stop_timeout
from pipecat_harness.input.identifier_formats import IdentifierHoldConfig
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.input.silent_reply import SilentReplyGuard
from pipecat_harness.input.spelling import SpellingNormalizer

if TYPE_CHECKING:
    from pipecat_harness.control import ControlHost

__all__ = ["IdentifierHoldControl", "SilentReplyControl", "SpellingControl"]


def _user_aggregator(processors: list[FrameProcessor]) -> LLMUserAggregator | None:
    return next((p for p in processors if isinstance(p, LLMUserAggregator)), None)


class IdentifierHoldControl(HarnessControl):
    """Wraps every configured user-turn stop strategy (or Pipecat's defaults) in an identifier hold."""

    name = "identifier_hold"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        # The settings' fields are the config's own (``enabled`` aside): consumed as they are.
        self.config = IdentifierHoldConfig.for_domain(**harness.config.identifier_hold.model_dump(exclude={"enabled"}))
        self.strategies: list[IdentifierHoldStopStrategy] = []

    def wrap_stop_strategies(self, strategies: list[Any]) -> list[Any]:
        """Return each stop strategy wrapped (already wrapped ones are kept as they are)."""
        wrapped: list[Any] = []
        for strategy in strategies or default_user_turn_stop_strategies():
            # The silent-reply guard ends only empty turns: there is nothing in them to hold.
            kept = isinstance(strategy, (IdentifierHoldStopStrategy, SilentReplyGuard))
            if not kept and isinstance(strategy, BaseUserTurnStopStrategy):
                strategy = IdentifierHoldStopStrategy(strategy, config=self.config, on_decision=self.record)
                self.strategies.append(strategy)
            wrapped.append(strategy)
        return wrapped

    def fit_turn_watchdog(self, params: Any, strategies: list[Any], *, adjust: bool = True) -> None:
        """Raise ``user_turn_stop_timeout`` to fit the longest hold, and tell each hold the watchdog.

        Once the aggregator exists the timeout cannot change; the holds then end before the watchdog.
        """
        holds = [s for s in strategies if isinstance(s, IdentifierHoldStopStrategy)]
        if not holds:
            return
        needed = max(required_stop_timeout(h.inner, self.config.longest_wait_secs) for h in holds)
        timeout = float(params.user_turn_stop_timeout)
        if adjust and timeout < needed:
            logger.info(f"identifier_hold: user_turn_stop_timeout raised from {timeout:.2f} s to {needed:.2f} s so "
                        f"the wrapped strategy's wait plus extra_wait_secs={self.config.extra_wait_secs:.2f} s "
                        "fits inside it")
            params.user_turn_stop_timeout = timeout = needed
        for hold in holds:
            hold.fit_watchdog(timeout, refuse=adjust)

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Let each hold read the tools' argument schemas from the user aggregator's context."""
        aggregator = _user_aggregator(processors)
        if aggregator is not None:
            for hold in self.strategies:
                hold.attach_context(aggregator.context)


class SpellingControl(HarnessControl):
    """Rewrites ASR spelling artifacts in final transcripts before the user aggregator."""

    name = "spelling"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        self.normalizer = SpellingNormalizer(harness.config.spelling, on_rewrite=self._on_decision)

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The normalizer, between STT and the user aggregator."""
        return [(Placement.BEFORE_USER_AGGREGATOR, self.normalizer)]

    def _on_decision(self, action: str, evidence: dict[str, Any]) -> None:
        self.record(action, {**evidence, "added_wait_ms": 0})


class SilentReplyControl(HarnessControl):
    """Re-asks a pending confirmation when the caller spoke but no transcript arrived.

    The guard runs beside the user aggregator's stop strategies and scopes its ``EmptyUserTurnConfig``.
    """

    name = "silent_reply"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        settings = harness.config.silent_reply.model_dump(exclude={"enabled"})  # the guard's own arguments
        self.guard = SilentReplyGuard(**settings, on_decision=self.record)

    def expect_confirmation(self, pending: bool | None = True) -> None:
        """Tell the guard a confirmation is (or is no longer) pending."""
        self.guard.expect_confirmation(pending)

    def wrap_stop_strategies(self, strategies: list[Any]) -> list[Any]:
        """The strategies as they are, with the guard beside them (once)."""
        listed = list(strategies or default_user_turn_stop_strategies())
        return listed if any(s is self.guard for s in listed) else [*listed, self.guard]

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Attach the guard to the user aggregator whose empty-turn recovery it scopes."""
        aggregator = _user_aggregator(processors)
        if aggregator is not None:
            self.guard.attach(aggregator)
