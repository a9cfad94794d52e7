"""A simulated TTS service producing silent audio of realistic duration."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import Frame, InterruptionFrame, TTSAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService

from pipecat_harness.fakes.speech import PUNCTUATION_PAUSE, speech_duration

__all__ = ["SimulatedTTSService", "SpeechLedger", "SpokenWord", "speech_duration"]


@dataclass(frozen=True)
class SpokenWord:
    """A word of synthesized speech with offsets from the start of its context's audio."""

    word: str
    start: float
    end: float


@dataclass
class SpeechLedger:
    """Ground truth per TTS context: the words synthesized (with offsets) and the seconds of audio actually played."""

    words: dict[str, list[SpokenWord]] = field(default_factory=dict)
    played_secs: dict[str, float] = field(default_factory=dict)
    synthesized_secs: dict[str, float] = field(default_factory=dict)

    def heard_words(self, context_id: str) -> list[str]:
        """Words of a context the caller heard: at least half of the word's audio was played."""
        played = self.played_secs.get(context_id, 0.0)
        return [w.word for w in self.words.get(context_id, []) if (w.start + w.end) / 2 <= played + 1e-9]


class SimulatedTTSService(TTSService):
    """TTS that yields silent 16-bit mono audio whose length matches the text.

    Args:
        word_timestamps: Report word start times (word-level history) or not (sentence-level history).
        words_per_minute: Speaking rate.
        first_audio_secs: Latency before the first audio chunk of each sentence.
        chunk_secs: Duration of each audio frame yielded.
        ledger: Where to record ground truth; a new one is created when omitted.
        **kwargs: Passed to ``TTSService``.
    """

    def __init__(self, *, word_timestamps: bool = False, words_per_minute: float = 165.0,
                 first_audio_secs: float = 0.2, chunk_secs: float = 0.1, ledger: SpeechLedger | None = None,
                 sample_rate: int = 16000, **kwargs: Any) -> None:
        settings = TTSSettings(model="simulated", extra={}, voice="simulated", language=None)
        super().__init__(push_text_frames=not word_timestamps, push_start_frame=True, push_stop_frames=True,
                         sample_rate=sample_rate, settings=settings, **kwargs)
        self._word_timestamps = word_timestamps
        self._wpm = words_per_minute
        self._first_audio_secs = first_audio_secs
        self._chunk_secs = chunk_secs
        self.ledger = ledger or SpeechLedger()
        self._offsets: dict[str, float] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Forget per-context offsets on interruption, then process as usual."""
        if isinstance(frame, InterruptionFrame):
            self._offsets.clear()
        await super().process_frame(frame, direction)

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Yield audio for ``text``; with word timestamps, report each word's start time."""
        if not (layout := speech_duration(text, self._wpm)):
            return
        # Sentences of one turn share a context: their word times are cumulative.
        base = self._offsets.get(context_id, 0.0)
        total = layout[-1][2] + PUNCTUATION_PAUSE.get(layout[-1][0][-1], 0.0)
        self._offsets[context_id] = base + total
        words = self.ledger.words.setdefault(context_id, [])
        words.extend(SpokenWord(word, base + start, base + end) for word, start, end in layout)
        self.ledger.synthesized_secs[context_id] = base + total
        if self._first_audio_secs:
            await asyncio.sleep(self._first_audio_secs)
        if self._word_timestamps:
            await self.add_word_timestamps([(word, base + start) for word, start, _ in layout], context_id)
        size = int(total * self.sample_rate * 2) // 2 * 2
        chunk = int(self._chunk_secs * self.sample_rate * 2) // 2 * 2
        for offset in range(0, size, chunk):
            yield TTSAudioRawFrame(bytes(min(chunk, size - offset)), self.sample_rate, 1, context_id=context_id)
