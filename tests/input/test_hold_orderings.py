"""The identifier hold under the frame orderings real streaming STT services produce.

Deepgram answers ``Finalize`` (sent on ``VADUserStoppedSpeakingFrame``) with the
last words 0.1-0.4 s *after* the VAD stop, sends interims while the caller is
quiet, and announces its P99 in an ``STTMetadataFrame``; Flux does its own turn
detection with ``ProposedUserStarted/StoppedSpeakingFrame``. Each test runs the
real ``LLMUserAggregator`` with Pipecat's own stop strategies and production
timings (0.6 s speech timeout, 2.5 s hold, 5 s watchdog) on the virtual clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pipecat.audio.turn.base_turn_analyzer import BaseTurnAnalyzer, BaseTurnParams, EndOfTurnState
from pipecat.frames.frames import (
    Frame,
    InterimTranscriptionFrame,
    LLMContextFrame,
    ProposedUserStartedSpeakingFrame,
    ProposedUserStoppedSpeakingFrame,
    STTMetadataFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import MetricsData
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import ExternalUserTurnStrategies, UserTurnStrategies

from pipecat_harness.input import IdentifierHoldConfig
from pipecat_harness.input.hold_budget import HoldBudgetError
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.sim.clock import virtual_time

DEEPGRAM_P99 = 0.35
VAD_STOP = 0.2


class _CompleteAtEveryPause(BaseTurnAnalyzer):
    """A turn model that calls every pause the end of the turn (what Smart Turn does on '... W two three.')."""

    @property
    def speech_triggered(self) -> bool:
        return False

    @property
    def params(self) -> BaseTurnParams:
        return BaseTurnParams()

    def append_audio(self, buffer: bytes, is_speech: bool) -> EndOfTurnState:
        return EndOfTurnState.INCOMPLETE

    async def analyze_end_of_turn(self) -> tuple[EndOfTurnState, MetricsData | None]:
        return EndOfTurnState.COMPLETE, None

    def clear(self) -> None:
        pass


@dataclass
class _Run:
    messages: list[str]
    context_frames: int
    decisions: list[tuple[str, dict[str, Any]]]
    stops: list[float] = field(default_factory=list)
    watchdog_fired: bool = False


def _on_virtual_clock(make: Callable[[], Awaitable[_Run]]) -> _Run:
    with virtual_time(max_virtual_secs=120.0, max_wall_secs=60.0) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(make())  # type: ignore[arg-type]


def _final(text: str, *, finalized: bool = False) -> TranscriptionFrame:
    return TranscriptionFrame(text=text, user_id="caller", timestamp="t", finalized=finalized)


def _interim(text: str) -> InterimTranscriptionFrame:
    return InterimTranscriptionFrame(text=text, user_id="caller", timestamp="t")


def _deepgram_utterance(parts: list[str], *, speak_secs: float, finalize_after: float) -> list[Frame]:
    """One stretch of speech: interims, is_final pieces while speaking, the Finalize answer after the VAD stop."""
    frames: list[Frame] = [VADUserStartedSpeakingFrame(start_secs=0.2)]
    step = speak_secs / len(parts)
    for part in parts[:-1]:
        frames += [SleepFrame(sleep=step / 2), _interim(part), SleepFrame(sleep=step / 2), _final(part)]
    frames += [SleepFrame(sleep=step / 2), _interim(parts[-1]), SleepFrame(sleep=step / 2 + VAD_STOP),
               VADUserStoppedSpeakingFrame(stop_secs=VAD_STOP), SleepFrame(sleep=finalize_after),
               _final(parts[-1], finalized=True)]
    return frames


async def _drive(stop: list[Any], frames: list[Frame], *, start: list[Any] | None = None,
                 strategies: UserTurnStrategies | None = None, stop_timeout: float = 6.5) -> _Run:
    context = LLMContext()
    turn_strategies = strategies or UserTurnStrategies(start=start, stop=stop)
    aggregator = LLMUserAggregator(context, params=LLMUserAggregatorParams(
        user_turn_strategies=turn_strategies, user_turn_stop_timeout=stop_timeout))
    loop = asyncio.get_running_loop()
    run = _Run([], 0, [])
    t0 = loop.time()

    @aggregator.event_handler("on_user_turn_stopped")
    async def _stopped(*_: Any) -> None:
        run.stops.append(loop.time() - t0)

    @aggregator.event_handler("on_user_turn_stop_timeout")
    async def _timeout(*_: Any) -> None:
        run.watchdog_fired = True

    down, _ = await run_test(aggregator, frames_to_send=[
        STTMetadataFrame(service_name="deepgram", ttfs_p99_latency=DEEPGRAM_P99), *frames])
    run.messages = [str(m["content"]) for m in context.get_messages()
                    if isinstance(m, dict) and m.get("role") == "user"]
    run.context_frames = sum(isinstance(f, LLMContextFrame) for f in down)
    return run


def _hold(inner: Any, decisions: list[tuple[str, dict[str, Any]]], **config: Any) -> IdentifierHoldStopStrategy:
    return IdentifierHoldStopStrategy(
        inner, config=IdentifierHoldConfig.for_domain("retail", **config),
        on_decision=lambda action, evidence: decisions.append((action, evidence)),
        user_turn_stop_timeout=6.5,
    )


def _split_order_number(finalize_after: float) -> list[Frame]:
    """'My order number is W two three.' -- 1.5 s of thought -- 'Seven eight' ... 'one five six.' (2.2 s)."""
    return [
        *_deepgram_utterance(["My order number is", "W two three."], speak_secs=2.0, finalize_after=0.3),
        SleepFrame(sleep=1.5 - 0.3),
        *_deepgram_utterance(["Seven eight", "one five six."], speak_secs=2.2, finalize_after=finalize_after),
        SleepFrame(sleep=8.0),
    ]


@pytest.mark.parametrize("finalize_after", [0.1, 0.25, 0.4])
@pytest.mark.parametrize("stop_kind", ["speech_timeout", "turn_analyzer"])
def test_final_after_the_vad_stop_lands_in_the_one_user_message(stop_kind: str, finalize_after: float) -> None:
    """The fault: after the caller resumed, the hold's own timer released before Deepgram's Finalize answer."""

    def inner() -> Any:
        if stop_kind == "speech_timeout":
            return SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
        return TurnAnalyzerUserTurnStopStrategy(turn_analyzer=_CompleteAtEveryPause())

    decisions: list[tuple[str, dict[str, Any]]] = []
    # A short cap: counting the caller's speaking time against it is what released early before.
    run = _on_virtual_clock(lambda: _drive([_hold(inner(), decisions, max_hold_secs=3.0)],
                                           _split_order_number(finalize_after)))

    assert run.messages == ["My order number is W two three. Seven eight one five six."]
    assert run.context_frames == 1
    assert not run.watchdog_fired
    actions = [a for a, _ in decisions]
    # Smart Turn-like strategies may end the turn on the first piece of the continuation; it is held again.
    assert actions[:2] == ["held", "resumed"] and actions[-1] == "merged" and "released" not in actions
    continuation_end = 2.0 + VAD_STOP + 0.3 + 1.5 - 0.3 + 2.2 + VAD_STOP
    # Released on the wrapped strategy's own decision, well inside 0.8 s of the continuation's end.
    assert run.stops[0] - continuation_end < 0.8
    # Only silence counts: the 1.5 s pause and the wait after the continuation, not its 2.2 s of speech.
    assert decisions[-1][1]["held_ms"] <= (1.5 + max(0.6, finalize_after)) * 1000 + 50


def test_interims_during_the_hold_cannot_stall_the_turn() -> None:
    """Interims with no VAD start and no final kept the turn open until the 5 s watchdog."""
    decisions: list[tuple[str, dict[str, Any]]] = []
    frames = [
        *_deepgram_utterance(["My email is", "mia dot li at"], speak_secs=1.8, finalize_after=0.2),
        SleepFrame(sleep=1.0), _interim("at"), SleepFrame(sleep=0.4), _interim("at"), SleepFrame(sleep=8.0),
    ]
    run = _on_virtual_clock(lambda: _drive(
        [_hold(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6), decisions)], frames))
    assert run.messages == ["My email is mia dot li at"]
    assert not run.watchdog_fired
    assert [a for a, _ in decisions] == ["held", "released"]
    speech_end = 1.8 + VAD_STOP
    # Released after the speech timeout, the 2.5 s hold and at most one interim grace: not at the watchdog.
    assert run.stops[0] - speech_end < 0.6 + 2.5 + DEEPGRAM_P99 + 0.05


def test_flux_turn_detection_is_kept_and_the_identifier_is_one_message() -> None:
    """Deepgram Flux: the STT proposes turn starts and ends; transcripts come with the proposed end."""
    decisions: list[tuple[str, dict[str, Any]]] = []
    strategies = ExternalUserTurnStrategies()
    [external] = strategies.stop or []
    strategies.stop = [_hold(external, decisions)]

    def flux_turn(text: str, speak: float) -> list[Frame]:
        return [ProposedUserStartedSpeakingFrame(), SleepFrame(sleep=speak / 2), _interim(text.split()[0]),
                SleepFrame(sleep=speak / 2), _final(text, finalized=True), ProposedUserStoppedSpeakingFrame()]

    frames = [*flux_turn("My order number is W two three", 1.8), SleepFrame(sleep=1.4),
              *flux_turn("seven eight one five six", 1.6), SleepFrame(sleep=6.0)]
    run = _on_virtual_clock(lambda: _drive([], frames, strategies=strategies))
    assert run.messages == ["My order number is W two three seven eight one five six"]
    assert run.context_frames == 1
    assert not run.watchdog_fired
    assert decisions[0][0] == "held" and decisions[-1][0] == "merged"


def test_a_continuation_of_an_identifier_already_submitted_is_not_held_again() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    frames = [
        *_deepgram_utterance(["My order number is", "W two three."], speak_secs=2.0, finalize_after=0.3),
        SleepFrame(sleep=4.0),  # longer than the hold: the first part goes to the model
        *_deepgram_utterance(["one five six."], speak_secs=1.0, finalize_after=0.3),
        SleepFrame(sleep=6.0),
    ]
    run = _on_virtual_clock(lambda: _drive(
        [_hold(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6), decisions)], frames))
    assert run.messages == ["My order number is W two three.", "one five six."]
    actions = [(a, e.get("reason")) for a, e in decisions]
    assert actions == [("held", actions[0][1]), ("released", "wait_expired"),
                       ("released", "continuation_of_submitted")]
    continuation_end = 2.0 + VAD_STOP + 0.3 + 4.0 + 1.0 + VAD_STOP
    assert run.stops[1] - continuation_end < 0.8  # the speech timeout alone


def test_a_hold_that_cannot_fit_the_watchdog_is_refused_with_the_numbers() -> None:
    inner = TurnAnalyzerUserTurnStopStrategy(turn_analyzer=_CompleteAtEveryPause())
    with pytest.raises(HoldBudgetError, match=r"2\.50 s.*user_turn_stop_timeout is 5\.00 s.*at least 6\.00 s"):
        IdentifierHoldStopStrategy(inner, config=IdentifierHoldConfig.for_domain("retail"), user_turn_stop_timeout=5.0)
