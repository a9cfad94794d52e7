"""``PlaybackTracker``: what each assistant reply generated, and how much of it was played.

The tracker sits right after the output transport. Everything it sees there
has been written to the caller: audio chunks are pushed on only after the
transport wrote them, and a TTS's sentence announcements and sentence- or
word-level ``TTSTextFrame``s are released in step with that audio. The base
output transport re-chunks audio and drops the ``context_id``, so audio is
attributed to the reply whose frames frame it (``LLMFullResponseStartFrame``
or ``TTSStartedFrame`` ... ``TTSStoppedFrame``/``LLMFullResponseEndFrame``).

It runs in direct mode: a queued ``InterruptionFrame`` (a system frame) would
otherwise overtake audio frames already written and waiting in its queue and
the tracker would lose played audio, the same race as Pipecat issue #4996.

Its companion :class:`SynthesisObserver` reads, off the frame path, the full
text each LLM response generated and the synthesized length of every sentence
the TTS announced; the estimate uses those lengths to map played seconds onto
a sentence. Where the transport reports real playback (Twilio ``mark``
echoes, see :mod:`pipecat_harness.history.marks`), receipts replace the
server-side count.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
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

from pipecat_harness.history.estimator import (
    DEFAULT_BIAS,
    DEFAULT_CHARS_PER_SEC,
    HeardPrefix,
    estimate_heard_prefix,
    split_units,
)
from pipecat_harness.history.marks import format_mark, parse_mark
from pipecat_harness.history.synthesis import SynthesisObserver

__all__ = ["PlaybackTracker", "ReplyPlayback", "ReplyState", "SpokenSegment"]

ReplyState = Literal["playing", "finished", "interrupted"]

_MAX_REPLIES = 64
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


class PlaybackTracker(FrameProcessor):
    """Records, per assistant reply, the generated text and how much of its audio was played.

    Args:
        bias: Share of a word that must have played for it to count as heard.
        chars_per_sec: Speaking rate used until the call's own rate is measured.
        synthesis: The observer that reports generated text and sentence lengths
            (one is created when omitted; add :attr:`observer` to the worker).
        **kwargs: Passed to ``FrameProcessor``.
    """

    def __init__(
        self,
        *,
        bias: float = DEFAULT_BIAS,
        chars_per_sec: float = DEFAULT_CHARS_PER_SEC,
        synthesis: SynthesisObserver | None = None,
        **kwargs: Any,
    ) -> None:
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

    # Receipts -----------------------------------------------------------------

    def enable_marks(self, build_message: Callable[[str], Any], *, interval_secs: float = 0.25) -> None:
        """Send a playback mark upstream to the transport after written audio, every ``interval_secs``.

        Args:
            build_message: Turns a mark name into the transport message, e.g.
                ``lambda name: twilio_mark_message(stream_sid, name)``.
            interval_secs: Seconds of audio between marks.
        """
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
        """Take an echoed mark as a receipt; returns whether it was used.

        Marks echoed after a reply stopped playing (Twilio echoes pending marks
        when its buffer is cleared) are ignored.
        """
        mark = parse_mark(name)
        if mark is None:
            return False
        reply = next((r for r in self.replies if r.reply_id == mark.reply_id), None)
        if reply is None or reply.state != "playing":
            return False
        reply.receipt_secs = max(reply.receipt_secs or 0.0, mark.played_secs)
        return True

    def on_playback_receipt(self, context_id: str | None, played_secs: float, *, requested: bool = False) -> bool:
        """Take a receipt keyed by TTS context (marks requested by another component, e.g. the Twilio bot).

        Args:
            context_id: The TTS context the mark followed.
            played_secs: Seconds of that context's audio before the mark.
            requested: True when the mark was only sent (not yet echoed): from
                then on the reply's playback counts only confirmed audio.

        Returns:
            Whether the receipt applies to a reply still playing (or not yet seen).
        """
        if context_id is None:
            return False
        reply = next((r for r in reversed(self.replies) if r.context_id == context_id), None)
        if reply is not None and reply.state != "playing":
            return False
        if requested:
            self._receipt_contexts.setdefault(context_id, 0.0)
        else:
            self._receipt_contexts[context_id] = max(self._receipt_contexts.get(context_id, 0.0), played_secs)
        if len(self._receipt_contexts) > _MAX_REPLIES:
            self._receipt_contexts.pop(next(iter(self._receipt_contexts)))
        if reply is not None:
            self._apply_receipts(reply)
        return True

    def on_mark_event(self, event: Any) -> None:
        """Listener for mark events with ``kind``, ``context_id`` and ``audio_secs`` (as the Twilio bot emits).

        ``requested`` switches the reply to receipts, ``played`` confirms
        playback; ``cleared`` and unknown marks prove nothing and are ignored.
        """
        kind = getattr(event, "kind", None)
        if kind in ("requested", "played"):
            self.on_playback_receipt(getattr(event, "context_id", None), float(getattr(event, "audio_secs", 0.0)),
                                     requested=kind == "requested")

    def _apply_receipts(self, reply: ReplyPlayback) -> None:
        if reply.context_id is not None and reply.context_id in self._receipt_contexts:
            reply.marks_sent = True
            reply.receipt_secs = max(reply.receipt_secs or 0.0, self._receipt_contexts[reply.context_id])

    # Records ------------------------------------------------------------------

    @property
    def current(self) -> ReplyPlayback | None:
        """The reply now playing, if any."""
        if self.replies and self.replies[-1].state == "playing":
            return self.replies[-1]
        return None

    @property
    def last(self) -> ReplyPlayback | None:
        """The most recent reply."""
        return self.replies[-1] if self.replies else None

    def complete(self, reply: ReplyPlayback) -> ReplyPlayback:
        """Fill in what the synthesis observer learned about ``reply`` and return it."""
        if reply.response_frame_id is not None:
            generated = self.observer.generated_text(reply.response_frame_id)
            if generated:
                reply.generated_text = generated
        return reply

    def chars_per_sec(self, extra: ReplyPlayback | None = None) -> float:
        """Speaking rate measured on this call's completely synthesized sentences (or the default).

        Args:
            extra: A reply to include even when it is not in :attr:`replies`.
        """
        letters, secs = 0, 0.0
        replies = [*self.replies, *([extra] if extra is not None and extra not in self.replies else [])]
        for reply in replies:
            for segment in reply.segments:
                length = self.observer.audio_secs(segment.frame_id)
                if length and (segment.played_through or self.observer.synthesis_complete(segment.frame_id)):
                    letters += sum(1 for c in segment.text if c.isalnum())
                    secs += length
        return letters / secs if letters >= 20 and secs > 0 else self.default_chars_per_sec

    def heard_prefix(self, reply: ReplyPlayback) -> HeardPrefix:
        """Estimate the prefix of ``reply`` the caller heard."""
        self.complete(reply)
        played = reply.played_secs
        rate = self.chars_per_sec(reply)
        if reply.word_times:
            return estimate_heard_prefix(reply.spoken_text, played_secs=played, word_times=reply.word_times,
                                         bias=self.bias, chars_per_sec=rate)
        if not reply.segments:
            return estimate_heard_prefix(reply.full_text, played_secs=played, bias=self.bias, chars_per_sec=rate)
        kept: list[str] = []
        total_units = len(split_units(reply.spoken_text))
        heard_units = 0
        cumulative: float | None = 0.0
        partial: HeardPrefix | None = None
        for segment in reply.segments:
            length = self.observer.audio_secs(segment.frame_id)
            streaming = length is not None and not self.observer.synthesis_complete(segment.frame_id)
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
                                                bias=self.bias, chars_per_sec=rate)
            else:
                partial = estimate_heard_prefix(segment.text, played_secs=played - start, audio_secs=length,
                                                bias=self.bias, chars_per_sec=rate)
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

    # Frames -------------------------------------------------------------------

    def _open(self, *, response_frame_id: int | None = None, context_id: str | None = None) -> ReplyPlayback:
        reply = ReplyPlayback(reply_id=self._next_id, response_frame_id=response_frame_id, context_id=context_id)
        self._next_id += 1
        self.replies.append(reply)
        return reply

    def _reply_for_output(self) -> ReplyPlayback:
        return self.current or self._open()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Record what the transport played, then pass every frame on."""
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            await self._track(frame)
        await self.push_frame(frame, direction)

    async def _track(self, frame: Frame) -> None:
        if isinstance(frame, LLMFullResponseStartFrame):
            reply = self.current
            if reply is not None and reply.response_frame_id is None and _nothing_played(reply):
                # The TTS's start for this reply overtook the response start (it was
                # queued behind the previous reply's audio): one reply, not two.
                reply.response_frame_id = frame.id
            else:
                self._open(response_frame_id=frame.id)
        elif isinstance(frame, TTSStartedFrame):
            reply = self.current
            if reply is None or (reply.context_id is not None and reply.context_id != frame.context_id):
                reply = self._open()
            reply.context_id = frame.context_id
            self._apply_receipts(reply)
        elif isinstance(frame, TTSTextFrame):
            self._on_spoken_text(frame)
        elif isinstance(frame, AggregatedTextFrame):
            if frame.text.strip():
                reply = self._reply_for_output()
                reply.segments.append(SpokenSegment(frame.text, frame.id, reply.written_secs))
        elif isinstance(frame, OutputAudioRawFrame):
            await self._on_audio(frame)
        elif isinstance(frame, TTSStoppedFrame):
            reply = self.current
            if reply is not None and reply.context_id in (None, frame.context_id):
                reply.state = "finished"
        elif isinstance(frame, LLMFullResponseEndFrame):
            reply = self.current
            if reply is not None:
                reply.state = "finished"
        elif isinstance(frame, InterruptionFrame):
            reply = self.current
            if reply is not None:
                reply.state = "interrupted"
                self.complete(reply)

    def _on_spoken_text(self, frame: TTSTextFrame) -> None:
        reply = self.current
        if reply is None:
            return
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

    async def _on_audio(self, frame: OutputAudioRawFrame) -> None:
        # Audio with no reply playing is the chunk that was being written when
        # an interruption arrived; it never opens a reply of its own.
        reply = self.current
        if reply is None or not frame.audio:
            return
        reply.written_secs += len(frame.audio) / float(frame.sample_rate * max(1, frame.num_channels) * 2)
        if self._mark_message is not None and reply.written_secs - reply.last_mark_secs >= self._mark_interval:
            name = self.mark_now()
            if name is not None:
                await self.push_frame(OutputTransportMessageUrgentFrame(message=self._mark_message(name)),
                                      FrameDirection.UPSTREAM)


def _nothing_played(reply: ReplyPlayback) -> bool:
    """Whether a reply has no audio, text or words yet (it only opened)."""
    return reply.written_secs <= 0 and not reply.segments and not reply.word_times
