"""IdentifierHoldStopStrategy driven through the real LLMUserAggregator with run_test."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pipecat.frames.frames import (
    Frame,
    InterimTranscriptionFrame,
    LLMContextFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import ExternalUserTurnStrategies, UserTurnStrategies

from pipecat_harness.input import IdentifierHoldConfig
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.sim.clock import virtual_time

SPEECH_TIMEOUT = 0.1
WAIT = 0.4


def _strategy(decisions: list[tuple[str, dict[str, Any]]], **config: Any) -> IdentifierHoldStopStrategy:
    settings = {"extra_wait_secs": WAIT, "max_hold_secs": 2.0, **config}
    return IdentifierHoldStopStrategy(
        SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=SPEECH_TIMEOUT),
        config=IdentifierHoldConfig.for_domain("retail", **settings),
        on_decision=lambda action, evidence: decisions.append((action, evidence)),
    )


def _aggregator(stop: list[Any], *, stop_timeout: float = 5.0) -> tuple[LLMUserAggregator, LLMContext]:
    context = LLMContext()
    params = LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(stop=stop), user_turn_stop_timeout=stop_timeout
    )
    return LLMUserAggregator(context, params=params), context


def _said(text: str, secs: float = 0.05) -> list[Frame]:
    return [
        VADUserStartedSpeakingFrame(),
        InterimTranscriptionFrame(text=text.split()[0], user_id="caller", timestamp="t"),
        SleepFrame(sleep=secs),
        TranscriptionFrame(text=text, user_id="caller", timestamp="t"),
        VADUserStoppedSpeakingFrame(),
    ]


def _user_messages(context: LLMContext) -> list[str]:
    return [str(m["content"]) for m in context.get_messages() if isinstance(m, dict) and m.get("role") == "user"]


def _context_frames(frames: list[Frame]) -> int:
    return sum(isinstance(f, LLMContextFrame) for f in frames)


async def test_split_order_number_is_held_and_merged_into_one_user_message() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    aggregator, context = _aggregator([_strategy(decisions)])
    frames = [
        *_said("my order number is W two three seven"),
        SleepFrame(sleep=SPEECH_TIMEOUT + 0.15),  # the speech timeout fired; the hold keeps the turn open
        *_said("eight one five six"),
        SleepFrame(sleep=SPEECH_TIMEOUT + 0.2),
    ]
    down, _ = await run_test(aggregator, frames_to_send=frames)

    assert _user_messages(context) == ["my order number is W two three seven eight one five six"]
    assert _context_frames(down) == 1
    actions = [a for a, _ in decisions]
    assert actions[0] == "held" and actions[-1] == "merged"
    held = decisions[0][1]
    assert held["rule"] == "prefix:order_id" and held["identifier"] == "W237"
    assert decisions[-1][1]["rule"] == "complete:order_id"
    # The turn was kept open across the pause, and released the moment the wrapped strategy ended the merged turn.
    assert decisions[-1][1]["held_ms"] > 0
    # On this real clock "the moment" is the processing time between the strategy's decision and the release: far
    # below the hold's own extra wait (which an expiry would add), never the 0 of a virtual clock under load.
    assert decisions[-1][1]["added_wait_ms"] < 200


async def test_without_the_hold_the_split_identifier_becomes_two_turns() -> None:
    aggregator, context = _aggregator([SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=SPEECH_TIMEOUT)])
    frames = [
        *_said("my order number is W two three seven"),
        SleepFrame(sleep=SPEECH_TIMEOUT + 0.15),
        *_said("eight one five six"),
        SleepFrame(sleep=SPEECH_TIMEOUT + 0.2),
    ]
    down, _ = await run_test(aggregator, frames_to_send=frames)
    assert _user_messages(context) == ["my order number is W two three seven", "eight one five six"]
    assert _context_frames(down) == 2


async def test_hold_is_released_when_the_wait_expires() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    aggregator, context = _aggregator([_strategy(decisions)])
    frames = [*_said("my email is mia dot li at"), SleepFrame(sleep=SPEECH_TIMEOUT + WAIT + 0.3)]
    await run_test(aggregator, frames_to_send=frames)
    assert _user_messages(context) == ["my email is mia dot li at"]
    assert [a for a, _ in decisions] == ["held", "released"]
    released = decisions[-1][1]
    assert released["reason"] == "wait_expired"
    assert WAIT * 1000 * 0.9 <= released["added_wait_ms"] <= (WAIT + 0.3) * 1000


@pytest.mark.parametrize(
    "text",
    [
        "the zip code is 9 4 1 0 3",
        "my phone number is five five five, one two three, four five six seven",
        "I have 2 items, my order number is #W2378156.",
    ],
)
def test_complete_ids_and_ordinary_speech_pass_with_no_added_delay(text: str) -> None:
    # On the virtual clock: the turn-end times are the strategies' own, not the load of the machine.
    with virtual_time(max_virtual_secs=60.0, max_wall_secs=60.0) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            runner.run(_no_added_delay(text))


async def _no_added_delay(text: str) -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    held_turn_end: list[float] = []
    plain_turn_end: list[float] = []

    async def run(stop: Any, ends: list[float]) -> list[str]:
        aggregator, context = _aggregator([stop])
        loop = asyncio.get_running_loop()
        sent: list[float] = []

        @aggregator.event_handler("on_user_turn_stopped")
        async def _stopped(*_: Any) -> None:
            ends.append(loop.time() - sent[0])

        frames = [*_said(text), SleepFrame(sleep=SPEECH_TIMEOUT + WAIT + 0.2)]
        sent.append(loop.time())
        await run_test(aggregator, frames_to_send=frames)
        return _user_messages(context)

    assert await run(_strategy(decisions), held_turn_end) == [text]
    assert await run(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=SPEECH_TIMEOUT), plain_turn_end) == [text]
    assert decisions == []  # nothing held, nothing recorded
    # Both turns end after the speech timeout alone, far from the additional wait.
    assert held_turn_end[0] < SPEECH_TIMEOUT + WAIT / 2
    assert abs(held_turn_end[0] - plain_turn_end[0]) < WAIT / 2


async def test_interim_in_silence_defers_the_release_and_the_completing_final_merges() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    aggregator, context = _aggregator([_strategy(decisions)])
    frames = [
        *_said("it's spelled S M I"),
        SleepFrame(sleep=SPEECH_TIMEOUT + WAIT * 0.6),
        InterimTranscriptionFrame(text="T", user_id="caller", timestamp="t"),
        SleepFrame(sleep=WAIT * 0.6),  # past the original deadline: the interim gave the STT time for its final
        TranscriptionFrame(text="T H, that's it", user_id="caller", timestamp="t"),
        SleepFrame(sleep=SPEECH_TIMEOUT + 0.2),
    ]
    await run_test(aggregator, frames_to_send=frames)
    assert _user_messages(context) == ["it's spelled S M I T H, that's it"]
    actions = [a for a, _ in decisions]
    assert actions == ["held", "merged"]


async def test_max_total_hold_bounds_a_caller_who_keeps_pausing() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    aggregator, context = _aggregator([_strategy(decisions, max_hold_secs=0.5)])
    frames: list[Frame] = []
    for chunk in ["the code is A B", "C D", "E F", "G H"]:
        frames += [*_said(chunk), SleepFrame(sleep=SPEECH_TIMEOUT + 0.3)]
    frames.append(SleepFrame(sleep=0.6))
    await run_test(aggregator, frames_to_send=frames)
    messages = _user_messages(context)
    assert "".join(messages).replace(" ", "").startswith("thecodeisABCD")
    released = [e for a, e in decisions if a == "released"]
    assert released and released[0]["reason"] == "max_hold"
    assert released[0]["held_ms"] <= 500 + 150


async def test_watchdog_ends_a_held_turn_and_the_release_is_recorded() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    aggregator, context = _aggregator([_strategy(decisions, extra_wait_secs=3.0, max_hold_secs=5.0)], stop_timeout=0.5)
    await run_test(aggregator, frames_to_send=[*_said("my user id is mia underscore"), SleepFrame(sleep=1.2)])
    assert _user_messages(context) == ["my user id is mia underscore"]
    assert [a for a, _ in decisions] == ["held", "released"]
    assert decisions[-1][1]["reason"] == "turn_stopped_elsewhere"


class _BrokenStrategy(SpeechTimeoutUserTurnStopStrategy):
    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        raise RuntimeError("analyzer crashed")


async def test_a_wrapped_strategy_that_raises_loses_no_turn() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    hold = IdentifierHoldStopStrategy(
        _BrokenStrategy(),
        config=IdentifierHoldConfig.for_domain("retail", extra_wait_secs=WAIT),
        on_decision=lambda action, evidence: decisions.append((action, evidence)),
        fallback_stop_secs=0.1,
    )
    aggregator, context = _aggregator([hold])
    down, _ = await run_test(aggregator, frames_to_send=[*_said("I want a refund"), SleepFrame(sleep=0.5)])
    assert _user_messages(context) == ["I want a refund"]
    assert _context_frames(down) == 1
    assert decisions[0][0] == "error" and "analyzer crashed" in decisions[0][1]["error"]


@pytest.mark.parametrize("text", ["", "   ", "Ich möchte zurückgeben 我想退货", "W two " * 20_000])
async def test_bad_input_never_crashes_or_loses_the_turn(text: str) -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    aggregator, context = _aggregator([_strategy(decisions)], stop_timeout=1.0)
    frames = [
        VADUserStartedSpeakingFrame(),
        TranscriptionFrame(text=text, user_id="caller", timestamp="t"),
        VADUserStoppedSpeakingFrame(),
        SleepFrame(sleep=SPEECH_TIMEOUT + WAIT + 0.3),
    ]
    await run_test(aggregator, frames_to_send=frames)
    if text.strip():
        assert [m.strip() for m in _user_messages(context)] == [text.strip()]
    else:
        assert _user_messages(context) == []


def test_inner_must_be_a_stop_strategy() -> None:
    with pytest.raises(TypeError, match="BaseUserTurnStopStrategy"):
        IdentifierHoldStopStrategy(object())  # type: ignore[arg-type]


async def test_wraps_an_external_stt_turn_strategy_too() -> None:
    """Flux-style turn detection: the STT announces turn starts and stops itself."""
    decisions: list[tuple[str, dict[str, Any]]] = []
    strategies = ExternalUserTurnStrategies()
    [external] = strategies.stop or []
    strategies.stop = [
        IdentifierHoldStopStrategy(
            external,
            config=IdentifierHoldConfig.for_domain("retail", extra_wait_secs=1.0),
            on_decision=lambda action, evidence: decisions.append((action, evidence)),
        )
    ]
    context = LLMContext()
    aggregator = LLMUserAggregator(context, params=LLMUserAggregatorParams(user_turn_strategies=strategies))

    def turn(text: str) -> list[Frame]:
        return [
            UserStartedSpeakingFrame(),
            TranscriptionFrame(text=text, user_id="caller", timestamp="t"),
            UserStoppedSpeakingFrame(),
        ]

    frames = [
        *turn("my email is mia dot li at"),
        SleepFrame(sleep=0.7),
        *turn("example dot com"),
        SleepFrame(sleep=0.8),
    ]
    down, _ = await run_test(aggregator, frames_to_send=frames)
    assert _user_messages(context) == ["my email is mia dot li at example dot com"]
    assert _context_frames(down) == 1
    assert next(a for a, _ in decisions) == "held" and decisions[-1][0] == "merged"
