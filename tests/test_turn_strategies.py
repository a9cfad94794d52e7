"""Harness.user_params and the turn-strategy advisor: the service's strategies kept, wrapped only by a stop control."""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.frames.frames import (
    Frame,
    InterimTranscriptionFrame,
    LLMContextFrame,
    ProposedUserStartedSpeakingFrame,
    ProposedUserStoppedSpeakingFrame,
    STTMetadataFrame,
    TranscriptionFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_start import ExternalUserTurnStartStrategy
from pipecat.turns.user_stop import (
    ExternalUserTurnStopStrategy,
    SpeechTimeoutUserTurnStopStrategy,
    TurnAnalyzerUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import ExternalUserTurnStrategies, UserTurnStrategies

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import Harness
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.input.silent_reply import SilentReplyGuard
from pipecat_harness.sim.clock import virtual_time
from pipecat_harness.turn_strategies import TurnStrategyAdvisor


def _harness(*controls: str) -> Harness:
    return Harness(HarnessConfig.preset("retail").only(*controls), call_id="c", trace_path=None)


def test_with_no_stop_strategy_control_user_params_change_nothing() -> None:
    params = LLMUserAggregatorParams()
    harness = _harness("spelling")
    assert harness.user_params(params) is params
    assert params.user_turn_strategies is None and params.user_turn_stop_timeout == 5.0
    pair_parts = harness.place([LLMUserAggregator(LLMContext(), params=params)])
    assert not any(isinstance(p, TurnStrategyAdvisor) for p in pair_parts)


def test_with_the_hold_off_the_params_stay_as_given_and_a_flux_recommendation_is_kept() -> None:
    """The silent-reply guard only joins the strategies the aggregator adopts; it replaces none of them."""
    params = LLMUserAggregatorParams()
    harness = _harness("spelling", "silent_reply")
    assert harness.user_params(params) is params
    assert params.user_turn_strategies is None and params.user_turn_stop_timeout == 5.0
    frames = [STTMetadataFrame(service_name="DeepgramFluxSTTService", ttfs_p99_latency=0.35,
                               user_turn_strategies=ExternalUserTurnStrategies()), SleepFrame(sleep=0.1)]

    async def run() -> LLMUserAggregator:
        aggregator = LLMUserAggregator(LLMContext(), params=params)
        await run_test(Pipeline(harness.place([aggregator])), frames_to_send=frames)
        return aggregator

    aggregator = _on_virtual_clock(run())
    strategies = aggregator._user_turn_controller.user_turn_strategies
    assert isinstance(strategies, ExternalUserTurnStrategies)
    assert [type(s) for s in strategies.start or []] == [ExternalUserTurnStartStrategy]
    flux, guard = strategies.stop or []
    assert isinstance(flux, ExternalUserTurnStopStrategy) and isinstance(guard, SilentReplyGuard)


def test_strategies_the_bot_passes_are_wrapped_and_the_watchdog_fits_the_hold() -> None:
    stop = SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
    params = _harness("identifier_hold").user_params(
        LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[stop])))
    (hold,) = params.user_turn_strategies.stop
    assert isinstance(hold, IdentifierHoldStopStrategy) and hold.inner is stop
    assert params.user_turn_stop_timeout == 5.0  # 1.0 s (STT p99) + 2.5 s + margin fits


def test_with_no_strategies_the_params_stay_empty_and_the_smart_turn_default_gets_room() -> None:
    params = LLMUserAggregatorParams()
    _harness("identifier_hold").user_params(params)
    assert params.user_turn_strategies is None  # the aggregator still adopts a service's recommendation
    assert params.user_turn_stop_timeout == 6.0  # Smart Turn's 3 s fallback + 2.5 s hold + 0.5 s margin


async def _run_pipeline(harness: Harness, frames: list[Frame]) -> tuple[LLMUserAggregator, LLMContext, int]:
    context = LLMContext()
    aggregator = LLMUserAggregator(context, params=harness.user_params(LLMUserAggregatorParams()))
    down, _ = await run_test(Pipeline(harness.place([aggregator])), frames_to_send=frames)
    return aggregator, context, sum(isinstance(f, LLMContextFrame) for f in down)


def _on_virtual_clock(coro: Any) -> Any:
    with virtual_time(max_virtual_secs=60.0, max_wall_secs=60.0) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(coro)


def test_pipecat_defaults_are_wrapped_when_no_service_recommends() -> None:
    aggregator, _, _ = _on_virtual_clock(_run_pipeline(_harness("identifier_hold"), [SleepFrame(sleep=0.1)]))
    (stop,) = aggregator._user_turn_controller.user_turn_strategies.stop
    assert isinstance(stop, IdentifierHoldStopStrategy)
    assert isinstance(stop.inner, TurnAnalyzerUserTurnStopStrategy)


def test_a_flux_recommendation_is_kept_wrapped_and_keeps_the_identifier_in_one_message() -> None:
    def flux_turn(text: str) -> list[Frame]:
        return [ProposedUserStartedSpeakingFrame(), SleepFrame(sleep=0.8),
                InterimTranscriptionFrame(text=text.split()[0], user_id="u", timestamp="t"), SleepFrame(sleep=0.8),
                TranscriptionFrame(text=text, user_id="u", timestamp="t", finalized=True),
                ProposedUserStoppedSpeakingFrame()]

    frames = [
        STTMetadataFrame(service_name="DeepgramFluxSTTService", ttfs_p99_latency=0.35,
                         user_turn_strategies=ExternalUserTurnStrategies()),
        SleepFrame(sleep=0.1),
        *flux_turn("my order number is W two three"), SleepFrame(sleep=1.2),
        *flux_turn("seven eight one five six"), SleepFrame(sleep=5.0),
    ]
    harness = _harness("identifier_hold")
    aggregator, context, runs = _on_virtual_clock(_run_pipeline(harness, frames))
    strategies = aggregator._user_turn_controller.user_turn_strategies
    assert isinstance(strategies, ExternalUserTurnStrategies)
    assert [type(s) for s in strategies.start or []] == [ExternalUserTurnStartStrategy]
    (stop,) = strategies.stop or []
    assert isinstance(stop, IdentifierHoldStopStrategy) and isinstance(stop.inner, ExternalUserTurnStopStrategy)
    users = [m["content"] for m in context.get_messages() if isinstance(m, dict) and m.get("role") == "user"]
    assert users == ["my order number is W two three seven eight one five six"]
    assert runs == 1
    assert [d.action for d in harness.decisions.decisions][-1] == "merged"
