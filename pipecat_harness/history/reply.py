"""One assistant reply's playback record, and the prefix of it the caller heard.

:class:`ReplyPlayback` is what :class:`~pipecat_harness.history.playback.PlaybackTracker`
records per reply: the sentences the TTS announced, the audio written (or
confirmed played by receipts) and word times. :func:`reply_heard_prefix`
composes the estimate over the reply's sentences: a sentence whose audio
played through is heard whole, the one being played is estimated with its
synthesized length (or, while its synthesis still streams, without a known
length), and nothing after it counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pipecat_harness.history.estimator import HeardPrefix, estimate_heard_prefix, split_units
from pipecat_harness.history.synthesis import SynthesisObserver

__all__ = ["ReplyPlayback", "ReplyState", "SpokenSegment", "measured_chars_per_sec", "reply_heard_prefix"]

ReplyState = Literal["playing", "finished", "interrupted"]

_EPSILON = 1e-6


@dataclass
class SpokenSegment:
    """One piece of text the TTS spoke for a reply (usually a sentence).

    Parameters:
        text: The text sent to the TTS.
        frame_id: Id of the ``AggregatedTextFrame`` that announced it.
        start_secs: Seconds of the reply's audio written when the announcement passed the transport.
        played_through: Whether its audio was written completely (its sentence text was released).
    """

    text: str
    frame_id: int | None
    start_secs: float
    played_through: bool = False


@dataclass
class ReplyPlayback:
    """Playback of one assistant reply.

    Parameters:
        reply_id: Sequence number of the reply in the call.
        context_id: The TTS context that spoke it.
        response_frame_id: Id of the ``LLMFullResponseStartFrame`` that opened it.
        segments: Text announced by the TTS, in order.
        word_times: ``(word, start_secs)`` of words released at word level (word-timestamp TTS).
        written_secs: Seconds of the reply's audio written to the transport.
        receipt_secs: Seconds confirmed played by playback receipts.
        marks_sent: Whether receipts were requested for this reply.
        state: ``playing``, ``finished`` (all audio written) or ``interrupted``.
        pipecat_committed: Text Pipecat's assistant aggregator committed for it, if any.
        generated_text: The complete text the LLM generated (filled by the synthesis observer).
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
        if self.marks_sent:
            return min(self.receipt_secs or 0.0, self.written_secs)
        return self.written_secs


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


def reply_heard_prefix(reply: ReplyPlayback, observer: SynthesisObserver, *, bias: float,
                       chars_per_sec: float) -> HeardPrefix:
    """Estimate the prefix of ``reply`` the caller heard.

    Args:
        reply: The reply, with its generated text filled in when known.
        observer: The synthesized length of each announced sentence.
        bias: Share of a word that must have played for it to count as heard.
        chars_per_sec: The voice's speaking rate (measured on the call, or a default).
    """
    played = reply.played_secs
    if reply.word_times:
        return estimate_heard_prefix(reply.spoken_text, played_secs=played, word_times=reply.word_times,
                                     bias=bias, chars_per_sec=chars_per_sec)
    if not reply.segments:
        return estimate_heard_prefix(reply.full_text, played_secs=played, bias=bias, chars_per_sec=chars_per_sec)
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
        if segment.played_through or (
                length is not None and not streaming and played >= start + length - _EPSILON):
            kept.append(segment.text.strip())
            heard_units += len(split_units(segment.text))
            continue
        if played <= start + _EPSILON:
            break
        if streaming:
            # The audio so far is a lower bound of the sentence's length, not its length.
            partial = estimate_heard_prefix(segment.text, played_secs=played - start, streaming=True,
                                            bias=bias, chars_per_sec=chars_per_sec)
        else:
            partial = estimate_heard_prefix(segment.text, played_secs=played - start, audio_secs=length,
                                            bias=bias, chars_per_sec=chars_per_sec)
        if partial.reliable and partial.text:
            kept.append(partial.text)
            heard_units += partial.units_heard
        break
    if not kept and partial is not None and not partial.reliable:
        return HeardPrefix(text="", method="none", confidence=0.0, reliable=False, reason=partial.reason,
                           units_total=total_units)
    if not kept and played <= 0:
        return HeardPrefix(text="", method="none", confidence=0.0, reliable=False, reason="no audio played",
                           units_total=total_units)
    if partial is None:
        return HeardPrefix(text=" ".join(kept), method="complete", confidence=1.0, units_heard=heard_units,
                           units_total=total_units)
    return HeardPrefix(text=" ".join(p for p in kept if p), method=partial.method,
                       confidence=partial.confidence, units_heard=heard_units, units_total=total_units)
