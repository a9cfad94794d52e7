"""One assistant reply's playback record, and the prefix of it the caller heard.

:func:`reply_heard_prefix` composes the estimate over the reply's sentences: a sentence whose audio played
through is heard whole, the one being played is estimated with its synthesized length (or, while it still
streams, without a known length), and nothing after it counts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pipecat_harness.history.estimator import HeardMethod, HeardPrefix, estimate_heard_prefix, split_units
from pipecat_harness.history.synthesis import SynthesisObserver

__all__ = ["ReplyPlayback", "ReplyState", "SpokenSegment", "measured_chars_per_sec", "reply_heard_prefix"]

ReplyState = Literal["playing", "finished", "interrupted"]

_EPSILON = 1e-6


@dataclass
class SpokenSegment:
    """One piece of text (usually a sentence) the TTS spoke for a reply, announced by ``frame_id``.

    ``start_secs``: the reply's audio written when the announcement passed the transport; ``played_through``: its
    audio was written completely (its sentence text was released).
    """

    text: str
    frame_id: int | None
    start_secs: float
    played_through: bool = False


@dataclass
class ReplyPlayback:
    """Playback of one assistant reply, by its TTS context and the ``LLMFullResponseStartFrame`` that opened it.

    ``segments`` are the sentences the TTS announced, ``word_times`` the ``(word, start_secs)`` of a word-timestamp
    TTS; ``written_secs`` of audio reached the transport, ``receipt_secs`` were confirmed played by receipts (when
    ``marks_sent``); ``pipecat_committed`` is what Pipecat's aggregator committed, ``generated_text`` the LLM's.
    """

    reply_id: int
    context_id: str | None = None
    response_frame_id: int | None = None
    segments: list[SpokenSegment] = field(default_factory=list)
    word_times: list[tuple[str, float]] = field(default_factory=list)
    written_secs: float = 0.0
    receipt_secs: float | None = None
    marks_sent: bool = False
    state: ReplyState = "playing"
    pipecat_committed: str | None = None
    generated_text: str = ""
    first_word_pts: int | None = None
    last_mark_secs: float = 0.0

    @property
    def spoken_text(self) -> str:
        """The text announced to the TTS, joined."""
        return " ".join(s.text.strip() for s in self.segments if s.text.strip())

    @property
    def full_text(self) -> str:
        """The generated text when known, else the spoken text."""
        return self.generated_text.strip() or self.spoken_text

    @property
    def played_secs(self) -> float:
        """Seconds played: confirmed receipts when requested, else the audio written."""
        return min(self.receipt_secs or 0.0, self.written_secs) if self.marks_sent else self.written_secs


def measured_chars_per_sec(replies: Iterable[ReplyPlayback], observer: SynthesisObserver, default: float) -> float:
    """Speaking rate measured on the replies' completely synthesized sentences (``default`` below 20 letters)."""
    letters, secs = 0, 0.0
    for reply in replies:
        for segment in reply.segments:
            length = observer.audio_secs(segment.frame_id)
            if length and (segment.played_through or observer.synthesis_complete(segment.frame_id)):
                letters += sum(1 for c in segment.text if c.isalnum())
                secs += length
    return letters / secs if letters >= 20 and secs > 0 else default


def reply_heard_prefix(
    reply: ReplyPlayback, observer: SynthesisObserver, *, bias: float, chars_per_sec: float
) -> HeardPrefix:
    """Estimate the prefix of ``reply`` the caller heard, with ``observer``'s synthesized sentence lengths."""
    played = reply.played_secs
    estimate = functools.partial(estimate_heard_prefix, bias=bias, chars_per_sec=chars_per_sec)
    if reply.word_times:
        return estimate(reply.spoken_text, played_secs=played, word_times=reply.word_times)
    if not reply.segments:
        return estimate(reply.full_text, played_secs=played)
    kept: list[str] = []
    total_units = len(split_units(reply.spoken_text))
    heard_units = 0
    cumulative: float | None = 0.0
    partial: HeardPrefix | None = None
    for segment in reply.segments:
        length = observer.audio_secs(segment.frame_id)
        streaming = length is not None and not observer.synthesis_complete(segment.frame_id)
        start = cumulative if cumulative is not None else segment.start_secs
        cumulative = cumulative + length if cumulative is not None and length is not None else None
        if segment.played_through or (length is not None and not streaming and played >= start + length - _EPSILON):
            kept.append(segment.text.strip())
            heard_units += len(split_units(segment.text))
            continue
        if played <= start + _EPSILON:
            break
        # While it streams, the audio so far is a lower bound of the sentence's length, not its length.
        partial = estimate(segment.text, played_secs=played - start, audio_secs=length, streaming=streaming)
        if partial.reliable and partial.text:
            kept.append(partial.text)
            heard_units += partial.units_heard
        break
    unreliable = partial is not None and not partial.reliable
    if not kept and (unreliable or played <= 0):
        reason = partial.reason if partial is not None and unreliable else "no audio played"
        return HeardPrefix("", "none", 0.0, reliable=False, reason=reason, units_total=total_units)
    method: HeardMethod = "complete" if partial is None else partial.method
    confidence = 1.0 if partial is None else partial.confidence
    text = " ".join(kept if partial is None else [p for p in kept if p])
    return HeardPrefix(text, method, confidence, units_heard=heard_units, units_total=total_units)
