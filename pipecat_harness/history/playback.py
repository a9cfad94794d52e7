"""``PlaybackTracker``: what each assistant reply generated, and how much of it was played.

It sits right after the output transport, where frames pass once written to the caller, and runs in direct mode
so a queued ``InterruptionFrame`` cannot overtake written audio (Pipecat issue #4996). Receipts (Twilio ``mark``
echoes) replace the server-side count.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pipecat.frames.frames import (
    AggregatedTextFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    OutputTransportMessageUrgentFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_harness.audio import audio_frame_secs
from pipecat_harness.history.estimator import (
    DEFAULT_BIAS,
    DEFAULT_CHARS_PER_SEC,
    HeardMethod,
    HeardPrefix,
    estimate_heard_prefix,
    split_units,
)
from pipecat_harness.history.marks import format_mark, parse_mark
from pipecat_harness.history.synthesis import SynthesisObserver

__all__ = ["PlaybackTracker", "ReplyPlayback", "ReplyState", "SpokenSegment", "measured_chars_per_sec",
           "reply_heard_prefix"]

ReplyState = Literal["playing", "finished", "interrupted"]

_MAX_REPLIES = 64
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
    measured = [(segment.text, length) for reply in replies for segment in reply.segments
                if (length := observer.audio_secs(segment.frame_id))
                and (segment.played_through or observer.synthesis_complete(segment.frame_id))]
    letters, secs = sum(c.isalnum() for text, _ in measured for c in text), sum(length for _, length in measured)
    return letters / secs if letters >= 20 and secs > 0 else default


def reply_heard_prefix(reply: ReplyPlayback, observer: SynthesisObserver, *, bias: float,
                       chars_per_sec: float) -> HeardPrefix:
    """Estimate the prefix of ``reply`` the caller heard, with ``observer``'s synthesized sentence lengths.

    A sentence whose audio played through is heard whole, the one being played is estimated with its synthesized
    length (or, while it still streams, without a known length), and nothing after it counts.
    """
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


class PlaybackTracker(FrameProcessor):
    """Records, per assistant reply, the generated text and how much of its audio was played.

    ``bias`` and ``chars_per_sec`` (used until the call's own rate is measured) go to the estimate; ``synthesis``
    (created when omitted) reports generated text and sentence lengths.
    """

    #: The frames it tracks besides the lifecycle frames; a placement group passes the rest by it.
    handled_frames: tuple[type[Frame], ...] = (LLMFullResponseStartFrame, LLMFullResponseEndFrame, TTSStartedFrame,
                                               TTSStoppedFrame, AggregatedTextFrame, OutputAudioRawFrame)

    def __init__(self, *, bias: float = DEFAULT_BIAS, chars_per_sec: float = DEFAULT_CHARS_PER_SEC,
                 synthesis: SynthesisObserver | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self.bias = bias
        self.default_chars_per_sec = chars_per_sec
        self.observer = synthesis or SynthesisObserver()
        self.replies: deque[ReplyPlayback] = deque(maxlen=_MAX_REPLIES)
        self._next_id = 1
        self._mark_message: Callable[[str], Any] | None = None
        self._mark_interval = 0.25
        self._receipt_contexts: dict[str, float] = {}

    def enable_marks(self, build_message: Callable[[str], Any], *, interval_secs: float = 0.25) -> None:
        """Send a mark upstream every ``interval_secs`` of written audio, as ``build_message(name)`` makes it."""
        self._mark_message = build_message
        self._mark_interval = max(0.02, interval_secs)

    def mark_now(self) -> str | None:
        """Return a mark name covering the audio written so far, for a bot that sends marks itself."""
        reply = self.current
        if reply is None:
            return None
        reply.marks_sent = True
        reply.last_mark_secs = reply.written_secs
        return format_mark(reply.reply_id, reply.written_secs)

    def on_mark_received(self, name: str) -> bool:
        """Take an echoed mark as a receipt; returns whether it was used (not after the reply stopped playing)."""
        mark = parse_mark(name)
        reply = next((r for r in self.replies if mark is not None and r.reply_id == mark.reply_id), None)
        if mark is None or reply is None or reply.state != "playing":
            return False
        reply.receipt_secs = max(reply.receipt_secs or 0.0, mark.played_secs)
        return True

    def on_playback_receipt(self, context_id: str | None, played_secs: float, *, requested: bool = False) -> bool:
        """Take a receipt: ``played_secs`` of TTS context ``context_id``'s audio before a mark another component sent.

        ``requested``: the mark was only sent; from then on the reply's playback counts only confirmed audio.
        Returns whether the receipt applies to a reply still playing (or not yet seen).
        """
        if context_id is None:
            return False
        reply = next((r for r in reversed(self.replies) if r.context_id == context_id), None)
        if reply is not None and reply.state != "playing":
            return False
        confirmed = self._receipt_contexts.get(context_id, 0.0)
        self._receipt_contexts[context_id] = confirmed if requested else max(confirmed, played_secs)
        if len(self._receipt_contexts) > _MAX_REPLIES:
            self._receipt_contexts.pop(next(iter(self._receipt_contexts)))
        if reply is not None:
            self._apply_receipts(reply)
        return True

    def on_mark_event(self, event: Any) -> None:
        """Listener for the Twilio bot's mark events; ``cleared`` and unknown kinds prove nothing and are ignored."""
        kind = getattr(event, "kind", None)
        if kind in ("requested", "played"):
            secs = float(getattr(event, "audio_secs", 0.0))
            self.on_playback_receipt(getattr(event, "context_id", None), secs, requested=kind == "requested")

    def _apply_receipts(self, reply: ReplyPlayback) -> None:
        if reply.context_id is not None and reply.context_id in self._receipt_contexts:
            reply.marks_sent = True
            reply.receipt_secs = max(reply.receipt_secs or 0.0, self._receipt_contexts[reply.context_id])

    @property
    def current(self) -> ReplyPlayback | None:
        """The reply now playing, if any."""
        return self.replies[-1] if self.replies and self.replies[-1].state == "playing" else None

    @property
    def last(self) -> ReplyPlayback | None:
        """The most recent reply."""
        return self.replies[-1] if self.replies else None

    def complete(self, reply: ReplyPlayback) -> ReplyPlayback:
        """Fill in what the synthesis observer learned about ``reply`` and return it."""
        if reply.response_frame_id is not None:
            reply.generated_text = self.observer.generated_text(reply.response_frame_id) or reply.generated_text
        return reply

    def chars_per_sec(self, extra: ReplyPlayback | None = None) -> float:
        """Speaking rate measured on this call's completely synthesized sentences (or the default), with ``extra``."""
        replies = [*self.replies, *([extra] if extra is not None and extra not in self.replies else [])]
        return measured_chars_per_sec(replies, self.observer, self.default_chars_per_sec)

    def heard_prefix(self, reply: ReplyPlayback) -> HeardPrefix:
        """Estimate the prefix of ``reply`` the caller heard."""
        return reply_heard_prefix(self.complete(reply), self.observer, bias=self.bias,
                                  chars_per_sec=self.chars_per_sec(reply))

    def _open(self, *, response_frame_id: int | None = None, context_id: str | None = None) -> ReplyPlayback:
        reply = ReplyPlayback(reply_id=self._next_id, response_frame_id=response_frame_id, context_id=context_id)
        self._next_id += 1
        self.replies.append(reply)
        return reply

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Record what the transport played, then pass every frame on."""
        await super().process_frame(frame, direction)
        await self.inspect_frame(frame, direction)
        await self.push_frame(frame, direction)

    async def inspect_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Record what a frame going downstream says was played (the frame goes on unchanged)."""
        if direction != FrameDirection.DOWNSTREAM:
            return
        if not isinstance(frame, OutputAudioRawFrame):
            self._track(frame)
            return
        # Audio, most of what passes: a sum, no coroutine. Audio with no reply playing is the chunk that was
        # being written when an interruption arrived; it never opens a reply of its own.
        reply = self.replies[-1] if self.replies else None
        if reply is None or reply.state != "playing" or not frame.audio:
            return
        reply.written_secs += audio_frame_secs(frame)
        if self._mark_message is not None and reply.written_secs - reply.last_mark_secs >= self._mark_interval:
            name = self.mark_now()
            if name is not None:
                await self.push_frame(OutputTransportMessageUrgentFrame(message=self._mark_message(name)),
                                      FrameDirection.UPSTREAM)

    def _track(self, frame: Frame) -> None:
        reply = self.current
        if isinstance(frame, LLMFullResponseStartFrame):
            if reply is not None and reply.response_frame_id is None and not (
                    reply.written_secs > 0 or reply.segments or reply.word_times):
                # The TTS's start for this reply overtook the response start (it was queued behind
                # the previous reply's audio) and nothing of it played yet: one reply, not two.
                reply.response_frame_id = frame.id
            else:
                self._open(response_frame_id=frame.id)
        elif isinstance(frame, TTSStartedFrame):
            if reply is None or (reply.context_id is not None and reply.context_id != frame.context_id):
                reply = self._open()
            reply.context_id = frame.context_id
            self._apply_receipts(reply)
        elif isinstance(frame, TTSTextFrame):
            if reply is not None:
                self._on_spoken_text(frame, reply)
        elif isinstance(frame, AggregatedTextFrame):
            if frame.text.strip():
                reply = reply or self._open()
                reply.segments.append(SpokenSegment(frame.text, frame.id, reply.written_secs))
        elif reply is None:
            return
        elif isinstance(frame, LLMFullResponseEndFrame) or (
                isinstance(frame, TTSStoppedFrame) and reply.context_id in (None, frame.context_id)):
            reply.state = "finished"
        elif isinstance(frame, InterruptionFrame):
            reply.state = "interrupted"
            self.complete(reply)

    def _on_spoken_text(self, frame: TTSTextFrame, reply: ReplyPlayback) -> None:
        if frame.pts:
            if reply.first_word_pts is None:
                reply.first_word_pts = frame.pts
            reply.word_times.append((frame.text, (frame.pts - reply.first_word_pts) / 1e9))
            return
        pending = [s for s in reply.segments if not s.played_through]
        match = next((s for s in pending if frame.segment_id is not None and s.frame_id == frame.segment_id), None)
        match = match or next((s for s in pending if s.text.strip() == frame.text.strip()), None)
        match = match or (pending[0] if pending else None)
        if match is not None:
            match.played_through = True
