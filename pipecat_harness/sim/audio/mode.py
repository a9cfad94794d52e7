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
        prompt: Whisper's ``initial_prompt`` (empty: none). A style prompt priming digits as digits was measured on the
            bundled audio scenarios and lost more calls than it won (README, audio mode), so none is set.
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
        if self.turn_stop not in TURN_STOPS:
            raise ValueError(f"unknown turn stop {self.turn_stop!r}; choose one of {', '.join(TURN_STOPS)}")
        require_audio_mode()
        self.cache = AudioCache(self.cache_dir)

    def front_end(self, scenario: Any = None) -> list[Any]:
        """Silero VAD and the Whisper recogniser, placed before the user aggregator.

        Args:
            scenario: The call's scenario; its domain terms and customer names key the recogniser (``None``: a cold
                recogniser).
        """
        from pipecat.audio.vad.silero import SileroVADAnalyzer
        from pipecat.processors.audio.vad_processor import VADProcessor

        from pipecat_harness.sim.audio.recogniser import CachedWhisperSTTService
        from pipecat_harness.sim.audio.vocabulary import recogniser_vocabulary

        vocabulary = recogniser_vocabulary(scenario) if scenario is not None else ""
        stt = CachedWhisperSTTService(self.cache, latency_secs=self.stt_latency_secs, vocabulary=vocabulary,
                                      prompt=self.prompt)
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
    if turn_stop != "speech_timeout":
        raise ValueError(f"unknown turn stop {turn_stop!r}; choose one of {', '.join(TURN_STOPS)}")
    return SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
