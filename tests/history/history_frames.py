"""Frames a TTS and an output transport produce for one assistant reply, for driving history processors."""

from __future__ import annotations

from pipecat.frames.frames import (
    AggregatedTextFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.tests.utils import SleepFrame

SAMPLE_RATE = 16000
CHUNK_SECS = 0.04


def audio(secs: float) -> list[Frame]:
    """Audio chunks of ``secs`` seconds, as the transport pushes them after writing."""
    chunks = round(secs / CHUNK_SECS)
    size = int(CHUNK_SECS * SAMPLE_RATE) * 2
    return [OutputAudioRawFrame(audio=bytes(size), sample_rate=SAMPLE_RATE, num_channels=1) for _ in range(chunks)]


def reply_start(context_id: str) -> list[Frame]:
    return [LLMFullResponseStartFrame(), TTSStartedFrame(context_id=context_id)]


def sentence(text: str, context_id: str, secs: float, *, played: float | None = None) -> list[Frame]:
    """A sentence announced, ``played`` seconds of its audio written, and its text released if all played."""
    played = secs if played is None else played
    frames: list[Frame] = [announce(text, context_id)]
    frames.extend(audio(played))
    if played >= secs:
        frames.append(TTSTextFrame(text=text, text_type="sentence", context_id=context_id))
    return frames


def announce(text: str, context_id: str) -> AggregatedTextFrame:
    """The TTS's announcement of a sentence it is about to speak (not itself added to the context)."""
    frame = AggregatedTextFrame(text=text, text_type="sentence", context_id=context_id)
    frame.append_to_context = False
    return frame


def reply_end(context_id: str) -> list[Frame]:
    return [TTSStoppedFrame(context_id=context_id), LLMFullResponseEndFrame()]


def settle() -> SleepFrame:
    """Let queued frames through before a system frame that would overtake them."""
    return SleepFrame(sleep=0.05)
