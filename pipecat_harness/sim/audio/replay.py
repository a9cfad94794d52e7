"""Replay a recorded utterance into a real ``LLMUserAggregator`` and measure what the model would have received."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.sim.audio.recording import Utterance
from pipecat_harness.sim.audio.voice import SAMPLE_RATE

__all__ = ["ReplayResult", "replay"]

#: Pipecat's P99 time-to-final for Whisper (``pipecat.services.stt_latency.WHISPER_TTFS_P99``).
WHISPER_P99_SECS = 1.0
_AUDIO_CHUNK_SECS = 0.1


@dataclass
class ReplayResult:
    """What one arm did with one utterance.

    The user messages written to the context, the virtual times the user turns stopped, the hold's ``(action,
    evidence)`` decisions, and whether the turn watchdog ended a turn.
    """

    messages: list[str] = field(default_factory=list)
    stops: list[float] = field(default_factory=list)
    decisions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    watchdog: bool = False


def replay(utterance: Utterance, pcm: bytes, *, turn_stop: str, hold_config: Any | None,
           question: str = "") -> ReplayResult:
    """Feed the recorded front-end events (and, for Smart Turn, the audio ``pcm``) to the user aggregator.

    ``hold_config`` is the identifier hold's (``None``: no hold); ``question``, when given, is the agent's question the
    caller answers, sent first as Pipecat's assistant-turn frame (the hold reads the slot from it).
    """
    from pipecat_harness.sim.clock import run_on_virtual_time

    arm = _replay(utterance, pcm, turn_stop, hold_config, question)
    return run_on_virtual_time(arm, max_virtual_secs=600.0, max_wall_secs=600.0)


async def _replay(utterance: Utterance, pcm: bytes, turn_stop: str, hold_config: Any | None,
                  question: str) -> ReplayResult:
    from pipecat.frames.frames import (
        Frame,
        InputAudioRawFrame,
        LLMContextAssistantTurnFrame,
        STTMetadataFrame,
        TranscriptionFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
    from pipecat.tests.utils import SleepFrame, run_test
    from pipecat.turns.user_turn_strategies import UserTurnStrategies

    from pipecat_harness.input.hold_budget import required_stop_timeout
    from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
    from pipecat_harness.sim.audio.mode import stop_strategy

    result = ReplayResult()
    inner = stop_strategy(turn_stop)
    timeout = 5.0
    stop: Any = inner
    if hold_config is not None:
        timeout = max(timeout, required_stop_timeout(inner, hold_config.longest_wait_secs))
        stop = IdentifierHoldStopStrategy(inner, config=hold_config, user_turn_stop_timeout=timeout,
                                          on_decision=lambda a, e: result.decisions.append((a, e)))
    context = LLMContext()
    params = LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[stop]),
                                     user_turn_stop_timeout=timeout)
    aggregator = LLMUserAggregator(context, params=params)
    loop = asyncio.get_running_loop()
    start = loop.time()

    @aggregator.event_handler("on_user_turn_stopped")
    async def _stopped(*_: Any) -> None:
        result.stops.append(loop.time() - start)

    @aggregator.event_handler("on_user_turn_stop_timeout")
    async def _timeout(*_: Any) -> None:
        result.watchdog = True

    timed: list[tuple[float, int, Frame]] = []
    for event in utterance.events:
        if event.kind == "vad_start":
            frame: Frame = VADUserStartedSpeakingFrame(start_secs=0.2)
        elif event.kind == "vad_stop":
            frame = VADUserStoppedSpeakingFrame(stop_secs=0.2)
        else:
            frame = TranscriptionFrame(text=event.text, user_id="caller", timestamp="", finalized=True)
        timed.append((event.t, 0, frame))
    if turn_stop == "smart_turn":
        chunk = int(_AUDIO_CHUNK_SECS * SAMPLE_RATE) * 2
        pcm = pcm.ljust(int(utterance.duration * SAMPLE_RATE) * 2, b"\x00")
        for index, offset in enumerate(range(0, len(pcm), chunk)):
            audio = pcm[offset : offset + chunk].ljust(chunk, b"\x00")
            frame = InputAudioRawFrame(audio=audio, sample_rate=SAMPLE_RATE, num_channels=1)
            timed.append((index * _AUDIO_CHUNK_SECS, 1, frame))
    timed.sort(key=lambda item: (item[0], item[1]))
    frames: list[Frame] = [STTMetadataFrame(service_name="WhisperSTTService", ttfs_p99_latency=WHISPER_P99_SECS)]
    if question:
        frames.append(LLMContextAssistantTurnFrame(text=question, timestamp=""))
    now = 0.0
    for t, _, frame in timed:
        if t > now:
            frames.append(SleepFrame(sleep=t - now))
            now = t
        frames.append(frame)
    frames.append(SleepFrame(sleep=max(0.0, utterance.duration - now)))
    await run_test(aggregator, frames_to_send=frames, expected_down_frames=None)
    users = [m for m in context.get_messages() if isinstance(m, dict) and m.get("role") == "user"]
    result.messages = [str(m["content"]) for m in users]
    return result
