"""What Silero VAD and Whisper tiny.en make of one caller utterance, recorded once and replayed per configuration."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipecat_harness.sim.audio.cache import AudioCache, digest, write_atomically
from pipecat_harness.sim.audio.recogniser import WHISPER_LATENCY_SECS
from pipecat_harness.sim.audio.voice import SAMPLE_RATE, PiperCallerVoice

__all__ = ["RecordedEvent", "Utterance", "is_recorded", "record_line", "record_utterance", "utterance_audio"]

#: Silence after the last word in a replay, long enough for every stop strategy and hold to finish.
TRAILING_SILENCE_SECS = 7.0
#: Silence the front end needs after the last word: VAD's stop window, the recogniser, its latency.
_FRONT_END_TAIL = bytes(int(1.5 * SAMPLE_RATE) * 2)
_CHUNK_SECS = 0.02


@dataclass(frozen=True)
class RecordedEvent:
    """A frame that reached the user aggregator: ``vad_start``, ``vad_stop`` or ``final`` (with its text)."""

    t: float
    kind: str
    text: str = ""


@dataclass
class Utterance:
    """One utterance as heard: the audio's landmarks and the recorded front-end events.

    Parameters:
        parts_end: End of each spoken part, in seconds from the start of the audio.
        duration: Length of the audio, trailing silence included.
        events: What VAD and the recogniser produced, in order.
    """

    parts_end: list[float]
    duration: float
    events: list[RecordedEvent]

    @property
    def transcripts(self) -> list[str]:
        """The recogniser's finals, in order."""
        return [e.text for e in self.events if e.kind == "final"]


def utterance_audio(parts: list[str], pause: float, voice: Any, *, rate: float) -> tuple[bytes, list[float]]:
    """The PCM of ``parts`` separated by ``pause`` seconds of silence (no trailing silence), and where each ends."""
    pcm = bytearray(bytes(int(0.3 * SAMPLE_RATE) * 2))  # the line is open before the caller speaks
    ends: list[float] = []
    for index, part in enumerate(parts):
        if index:
            pcm += bytes(int(pause * SAMPLE_RATE) * 2)
        pcm += voice.say(part, rate=rate)
        ends.append(len(pcm) / (2 * SAMPLE_RATE))
    return bytes(pcm), ends


def _events_path(cache: AudioCache, pcm: bytes, *key: str) -> Path:
    return cache.directory / "front_end" / f"{digest('front-end-v3', *key, pcm)}.json"


def is_recorded(parts: list[str], pause: float, *, rate: float, cache: AudioCache,
                stt_latency_secs: float = WHISPER_LATENCY_SECS) -> bool:
    """Whether the utterance's front-end events are cached (checked without synthesising anything)."""
    voice = PiperCallerVoice(cache)
    if not all(voice.is_cached(part, rate=rate) for part in parts):
        return False
    speech, _ = utterance_audio(parts, pause, voice, rate=rate)
    return bool(_events_path(cache, speech + _FRONT_END_TAIL, f"{stt_latency_secs:.3f}").exists())


def record_utterance(parts: list[str], pause: float, *, rate: float, cache: AudioCache,
                     stt_latency_secs: float = WHISPER_LATENCY_SECS) -> Utterance:
    """Run the utterance through Silero VAD and Whisper once (cached by content) and return what they produced."""
    speech, ends = utterance_audio(parts, pause, PiperCallerVoice(cache), rate=rate)
    pcm = speech + _FRONT_END_TAIL
    events = _recorded_events(parts, pcm, cache, stt_latency_secs, "tiny.en", f"{stt_latency_secs:.3f}")
    return Utterance(ends, len(speech) / (2 * SAMPLE_RATE) + TRAILING_SILENCE_SECS, events)


def record_line(parts: list[str], pause: float, *, voice: Any, rate: float, channel: str, recogniser: str,
                cache: AudioCache) -> tuple[Utterance, bytes]:
    """One cell of the speech matrix: ``voice`` reads the parts, ``channel`` carries them, ``recogniser`` hears them.

    Returns the utterance as heard and the audio as the bot received it (what Smart Turn analyses on replay). The
    channel acts on the whole line, trailing silence included (a noisy line is noisy between words too).
    """
    from pipecat_harness.sim.audio.channel import through_channel
    from pipecat_harness.sim.audio.recogniser import RECOGNISERS

    model_id, latency = RECOGNISERS[recogniser]
    speech, ends = utterance_audio(parts, pause, voice, rate=rate)
    line = through_channel(speech + bytes(int(TRAILING_SILENCE_SECS * SAMPLE_RATE) * 2), channel)
    front = line[: len(speech) + len(_FRONT_END_TAIL)]
    events = _recorded_events(parts, front, cache, latency, recogniser, model_id, f"{latency:.3f}")
    return Utterance(ends, len(speech) / (2 * SAMPLE_RATE) + TRAILING_SILENCE_SECS, events), line


def _recorded_events(parts: list[str], pcm: bytes, cache: AudioCache, stt_latency_secs: float, recogniser: str,
                     *key: str) -> list[RecordedEvent]:
    """The front end's events for ``pcm``, from the cache (under ``key``) or run once and stored."""
    from pipecat_harness.sim.clock import run_on_virtual_time

    path = _events_path(cache, pcm, *key)
    if path.exists():
        return [RecordedEvent(**e) for e in json.loads(path.read_text(encoding="utf-8"))["events"]]
    front_end = _front_end(pcm, cache, stt_latency_secs, recogniser)
    events = run_on_virtual_time(front_end, max_virtual_secs=600.0, max_wall_secs=900.0)
    write_atomically(path, json.dumps({"parts": parts, "events": [asdict(e) for e in events]}).encode("utf-8"))
    return events


async def _front_end(pcm: bytes, cache: AudioCache, stt_latency_secs: float, recogniser: str) -> list[RecordedEvent]:
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.frames.frames import (
        Frame,
        InputAudioRawFrame,
        TranscriptionFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.observers.base_observer import BaseObserver, FramePushed
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.processors.frame_processor import FrameDirection
    from pipecat.tests.utils import SleepFrame, run_test

    from pipecat_harness.sim.audio.recogniser import CachedWhisperSTTService

    loop = asyncio.get_running_loop()
    start = loop.time()
    events: list[RecordedEvent] = []
    stt = CachedWhisperSTTService(cache, latency_secs=stt_latency_secs, model=recogniser)
    kinds = {VADUserStartedSpeakingFrame: "vad_start", VADUserStoppedSpeakingFrame: "vad_stop",
             TranscriptionFrame: "final"}

    class _Tap(BaseObserver):
        async def on_push_frame(self, data: FramePushed) -> None:
            # VAD frames come from the VAD processor and pass through the recogniser: record what leaves it.
            if data.source is not stt or data.direction != FrameDirection.DOWNSTREAM:
                return
            frame: Any = data.frame
            kind = next((kind for cls, kind in kinds.items() if isinstance(frame, cls)), None)
            if kind is not None:
                events.append(RecordedEvent(round(loop.time() - start, 4), kind, frame.text if kind == "final" else ""))

    chunk = int(_CHUNK_SECS * SAMPLE_RATE) * 2
    frames: list[Frame] = []
    for offset in range(0, len(pcm), chunk):
        audio = pcm[offset : offset + chunk].ljust(chunk, b"\x00")
        frames += [InputAudioRawFrame(audio=audio, sample_rate=SAMPLE_RATE, num_channels=1), SleepFrame(_CHUNK_SECS)]
    pipeline = Pipeline([VADProcessor(vad_analyzer=SileroVADAnalyzer()), stt])
    await run_test(pipeline, frames_to_send=frames, expected_down_frames=None, observers=[_Tap()])
    return events
