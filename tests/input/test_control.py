"""The input controls plugged in through Harness."""

from __future__ import annotations

from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import CONTROL_FACTORIES, Harness
from pipecat_harness.input.control import IdentifierHoldControl, SilentReplyControl, SpellingControl
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.input.silent_reply import SilentReplyGuard
from pipecat_harness.input.spelling import SpellingNormalizer
from pipecat_harness.placement import flatten


def _harness(domain: str = "retail", **overrides: object) -> Harness:
    config = HarnessConfig.preset(domain, **overrides).only("identifier_hold", "spelling", "silent_reply")  # type: ignore[arg-type]
    return Harness(config.model_copy(update={"trace": config.trace.model_copy(update={"enabled": False})}))


def test_controls_are_registered() -> None:
    for name in ("identifier_hold", "spelling", "silent_reply"):
        assert name in CONTROL_FACTORIES
    harness = _harness()
    assert isinstance(harness.control("identifier_hold"), IdentifierHoldControl)
    assert isinstance(harness.control("spelling"), SpellingControl)
    assert isinstance(harness.control("silent_reply"), SilentReplyControl)


def test_every_configured_stop_strategy_is_wrapped_with_the_domain_preset() -> None:
    harness = _harness("telecom")
    first, second = SpeechTimeoutUserTurnStopStrategy(), SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=1.0)
    params = harness.user_params(LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[first, second])))
    strategies = params.user_turn_strategies.stop if params.user_turn_strategies else None
    assert strategies is not None and len(strategies) == 3
    *stop, guard = strategies
    assert isinstance(guard, SilentReplyGuard)  # beside them, not wrapped: it ends only empty turns
    assert all(isinstance(s, IdentifierHoldStopStrategy) for s in stop)
    assert [s.inner for s in stop] == [first, second]  # type: ignore[union-attr]
    assert stop[0].config.domain == "telecom" and stop[0].config.extra_wait_secs == 1.5  # type: ignore[union-attr]
    control = harness.control("identifier_hold")
    assert isinstance(control, IdentifierHoldControl)
    assert control.wrap_stop_strategies(strategies) == strategies  # never wrapped twice


def test_settings_reach_the_strategy_and_processors() -> None:
    harness = _harness(
        identifier_hold={"extra_wait_secs": 1.0, "max_hold_secs": 3.0, "exempt_digit_lengths": [5, 6]},
        spelling={"as_in": False, "spelled_letter_marks": False},
        silent_reply={"window_secs": 0.8, "max_reasks": 2, "prompt": "Yes or no?"},
    )
    control = harness.control("identifier_hold")
    assert isinstance(control, IdentifierHoldControl)
    assert control.config.extra_wait_secs == 1.0 and control.config.max_hold_secs == 3.0
    assert control.config.exempt_digit_lengths == frozenset({5, 6})

    stop = SpeechTimeoutUserTurnStopStrategy()
    params = harness.user_params(LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[stop])))
    user = LLMUserAggregator(LLMContext(), params=params)
    placed = flatten(harness.place([user]))
    index = placed.index(user)
    before = placed[:index]
    normalizer = next(p for p in before if isinstance(p, SpellingNormalizer))
    assert normalizer.rules.as_in is False and normalizer.rules.spelled_letter_marks is False
    # The guard runs beside the (held) stop strategy, on the aggregator's empty-turn recovery.
    hold, guard = params.user_turn_strategies.stop  # type: ignore[union-attr]
    assert isinstance(hold, IdentifierHoldStopStrategy) and hold.inner is stop
    assert isinstance(guard, SilentReplyGuard) and guard._aggregator is user
    assert (guard.window_secs, guard.max_reasks, guard.prompt) == (0.8, 2, "Yes or no?")


def test_decisions_land_in_the_call_log() -> None:
    harness = _harness()
    spelling = harness.control("spelling")
    assert isinstance(spelling, SpellingControl)
    spelling._on_decision("rewritten", {"before": "YAsInYellow", "after": "Y as in Yellow", "rules": ["as_in"]})
    [decision] = harness.decisions.by_control("spelling")
    assert decision.action == "rewritten" and decision.evidence["added_wait_ms"] == 0
