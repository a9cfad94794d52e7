"""Audio mode: the caller voiced on a phone line, the front end that hears it, and the stop strategy that decides."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipecat.frames.frames import InputAudioRawFrame

from pipecat_harness.sim.audio.cache import AudioCache
from pipecat_harness.sim.audio.recogniser import WHISPER_LATENCY_SECS
from pipecat_harness.sim.audio.requirements import require_audio_mode
from pipecat_harness.sim.audio.voice import SAMPLE_RATE, PiperCallerVoice
from pipecat_harness.sim.caller import SimulatedCaller
from pipecat_harness.sim.scenario import CallerSpec, CallerTurn

__all__ = ["FRAME_SECS", "TURN_STOPS", "AudioCaller", "AudioMode", "stop_strategy", "turn_audio"]

TurnStop = Literal["speech_timeout", "smart_turn"]
TURN_STOPS: tuple[str, ...] = ("speech_timeout", "smart_turn")
FRAME_SECS = 0.02
_FRAME_BYTES = int(SAMPLE_RATE * FRAME_SECS) * 2


@dataclass
class AudioMode:
    """How a simulated call is voiced and recognised.

    Parameters:
        turn_stop: The stop strategy: Pipecat's speech timeout (0.6 s) or Smart Turn v3.
        rate: Speaking-rate multiplier for the caller (``None``: from the scenario's words per minute).
        stt_latency_secs: Virtual seconds from the end of a segment to its transcript.
        cache_dir: Where synthesised audio and transcripts are kept (default: the user cache).
        prompt: Whisper's ``initial_prompt``; none by default (priming digits lost more bundled calls than it won).
    """

    turn_stop: TurnStop = "speech_timeout"
    rate: float | None = None
    stt_latency_secs: float = WHISPER_LATENCY_SECS
    cache_dir: Path | None = None
    prompt: str = ""
    cache: AudioCache = field(init=False)
    #: What the recogniser wrote in the last call whose front end was built (for reports of failed calls).
    last_heard: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        _check_turn_stop(self.turn_stop)
        require_audio_mode()
        self.cache = AudioCache(self.cache_dir)

    def front_end(self, scenario: Any = None) -> list[Any]:
        """Silero VAD and the Whisper recogniser, keyed with ``scenario``'s terms and names (``None``: cold)."""
        from pipecat.audio.vad.silero import SileroVADAnalyzer
        from pipecat.processors.audio.vad_processor import VADProcessor

        from pipecat_harness.sim.audio.recogniser import CachedWhisperSTTService
        from pipecat_harness.sim.audio.vocabulary import recogniser_vocabulary

        vocabulary = recogniser_vocabulary(scenario) if scenario is not None else ""
        latency = self.stt_latency_secs
        stt = CachedWhisperSTTService(self.cache, latency_secs=latency, vocabulary=vocabulary, prompt=self.prompt)
        self.last_heard = stt.heard
        return [VADProcessor(vad_analyzer=SileroVADAnalyzer()), stt]

    def caller(self, scenario: Any) -> Any:
        """The caller that voices ``scenario``'s script."""
        return AudioCaller(scenario.caller, scenario.caller_voice, PiperCallerVoice(self.cache), rate=self.rate)

    def stop_strategy(self) -> Any:
        """The user-turn stop strategy the call runs with."""
        return stop_strategy(self.turn_stop)


def stop_strategy(turn_stop: str) -> Any:
    """Pipecat's speech timeout (0.6 s) or Smart Turn v3 (its bundled ONNX model)."""
    from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy

    if turn_stop == "smart_turn":
        from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

        return TurnAnalyzerUserTurnStopStrategy(turn_analyzer=LocalSmartTurnAnalyzerV3())
    _check_turn_stop(turn_stop)
    return SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)


def _check_turn_stop(turn_stop: str) -> None:
    if turn_stop not in TURN_STOPS:
        raise ValueError(f"unknown turn stop {turn_stop!r}; choose one of {', '.join(TURN_STOPS)}")


def turn_audio(turn: CallerTurn, voice: PiperCallerVoice, *, rate: float = 1.0) -> bytes:
    """The PCM of one caller turn: each ``say`` voiced, pauses as silence, ``silent`` speech as a murmur."""
    out = bytearray()
    for segment in turn.speech:
        if segment.pause is not None:
            out += bytes(int(segment.pause * SAMPLE_RATE) * 2)
        elif segment.silent is not None:
            out += voice.murmur(segment.silent)
        elif segment.say:
            out += voice.say(segment.say, rate=rate)
    return bytes(out)


class AudioCaller(SimulatedCaller):
    """Speaks a caller script as audio into a running ``PipelineWorker``; ``rate`` multiplies Piper's own pace."""

    def __init__(self, turns: list[CallerTurn], spec: CallerSpec, voice: PiperCallerVoice, *,
                 rate: float | None = None) -> None:
        super().__init__(turns, spec)
        self._piper = voice
        self.rate = rate if rate is not None else spec.words_per_minute / 150.0
        self._pending = bytearray()
        self._drained = asyncio.Event()
        self._line: asyncio.Task[None] | None = None

    async def run(self, worker: Any, *, linger_secs: float = 1.0, final_wait_secs: float = 12.0) -> None:
        """Open the line, play the script, hang up."""
        self._line = asyncio.create_task(self._stream(worker))
        try:
            await super().run(worker, linger_secs=linger_secs, final_wait_secs=final_wait_secs)
        finally:
            if self._line is not None:
                self._line.cancel()

    async def _speak(self, worker: Any, turn: CallerTurn) -> None:
        audio = turn_audio(turn, self._piper, rate=self.rate)
        if not audio:
            return
        self._drained.clear()
        self._pending += audio
        await self._drained.wait()

    async def _end_call(self, worker: Any) -> None:
        if self._line is not None:
            self._line.cancel()
            self._line = None
        await super()._end_call(worker)

    async def _stream(self, worker: Any) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            chunk = bytes(self._pending[:_FRAME_BYTES]).ljust(_FRAME_BYTES, b"\x00")
            if self._pending:
                del self._pending[:_FRAME_BYTES]
                if not self._pending:
                    self._drained.set()
            await worker.queue_frame(InputAudioRawFrame(audio=chunk, sample_rate=SAMPLE_RATE, num_channels=1))
            due += FRAME_SECS
            await asyncio.sleep(max(0.0, due - loop.time()))
