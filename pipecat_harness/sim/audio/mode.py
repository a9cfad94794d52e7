"""Audio mode of the simulator: what replaces the scripted transcript frames, and which stop strategy decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipecat_harness.sim.audio.cache import AudioCache
from pipecat_harness.sim.audio.recogniser import WHISPER_LATENCY_SECS
from pipecat_harness.sim.audio.requirements import require_audio_mode

__all__ = ["TURN_STOPS", "AudioMode", "stop_strategy"]

TurnStop = Literal["speech_timeout", "smart_turn"]
TURN_STOPS: tuple[str, ...] = ("speech_timeout", "smart_turn")


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
        from pipecat_harness.sim.audio.caller import AudioCaller
        from pipecat_harness.sim.audio.voice import PiperCallerVoice

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
