"""Twilio ``mark`` events as playback receipts.

Twilio plays the audio a bot sends from its own buffer. A ``mark`` message
sent after some audio is echoed back once that audio has been played to the
caller; after a ``clear`` (barge-in) the marks still pending come back too,
although their audio was discarded. So a receipt is trusted as "played" only
when it arrives for a mark sent after the latest ``clear``.

Three pieces:

* :class:`PlaybackReceipts` keeps the marks of one call, writes them on the
  call's trace and tells listeners (the hook for history controls);
* :class:`TwilioMarkRequester` sits right before ``transport.output()`` and
  asks for a mark every ``interval_secs`` of a TTS context's audio and at its end;
* :class:`MarkingTwilioSerializer` is Pipecat's ``TwilioFrameSerializer`` that
  reports echoed marks and sent ``clear`` messages to the receipts.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    OutputTransportMessageFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.serializers.twilio import TwilioFrameSerializer

from pipecat_harness.trace.recorder import TraceRecorder

try:  # the history controls' mark-name format, so their playback tracker can read these receipts
    from pipecat_harness.history.marks import format_mark
except ImportError:  # same format, for installations without the history package
    def format_mark(reply_id: int, played_secs: float) -> str:
        """Return the mark name for ``played_secs`` of reply ``reply_id``'s audio."""
        return f"ph:{reply_id}:{max(0, round(played_secs * 1000))}"

__all__ = ["MarkEvent", "MarkingTwilioSerializer", "PlaybackReceipts", "TwilioMarkRequester"]

MarkKind = Literal["requested", "played", "cleared", "unknown"]


@dataclass(frozen=True)
class MarkEvent:
    """A mark requested from Twilio, or its receipt.

    Parameters:
        kind: ``requested`` (sent after some audio), ``played`` (echoed: that
            audio was heard), ``cleared`` (echoed after a ``clear``: the audio
            may have been discarded), ``unknown`` (a name this call never sent).
        name: The mark's name on the wire (``ph:<reply>:<milliseconds>``).
        reply_id: Number of the assistant reply (TTS context) within the call, from 1.
        context_id: The TTS context (one assistant reply) the audio belongs to.
        audio_secs: Seconds of that context's audio sent before the mark.
        final: The mark follows the context's last audio.
    """

    kind: MarkKind
    name: str
    reply_id: int = 0
    context_id: str | None = None
    audio_secs: float = 0.0
    final: bool = False


MarkListener = Callable[[MarkEvent], None]


class PlaybackReceipts:
    """The marks of one call and what their echoes mean.

    Args:
        recorder: The call's trace recorder; mark events go on its ``bot`` lane.
    """

    def __init__(self, recorder: TraceRecorder | None = None) -> None:
        self.recorder = recorder
        self._listeners: list[MarkListener] = []
        self._requests: dict[str, MarkEvent] = {}
        self._before_clear: set[str] = set()
        self._reply_ids: dict[str | None, int] = {}
        self._next_reply = itertools.count(1)
        self.events: list[MarkEvent] = []

    def add_listener(self, listener: MarkListener) -> None:
        """Call ``listener`` with every :class:`MarkEvent` (requests and receipts)."""
        self._listeners.append(listener)

    def reply_id(self, context_id: str | None) -> int:
        """The reply number of a TTS context (assigned on first use)."""
        if context_id not in self._reply_ids:
            self._reply_ids[context_id] = next(self._next_reply)
        return self._reply_ids[context_id]

    def requested(self, context_id: str | None, audio_secs: float, *, final: bool) -> MarkEvent:
        """Note a mark to be sent after ``audio_secs`` of context ``context_id``; return it with its name."""
        reply_id = self.reply_id(context_id)
        name = format_mark(reply_id, audio_secs)
        event = MarkEvent("requested", name, reply_id, context_id, round(audio_secs, 3), final)
        self._requests[name] = event
        self._emit(event)
        return event

    def cleared(self) -> None:
        """A ``clear`` was sent: every mark still outstanding will echo without proof of playback."""
        self._before_clear.update(self._requests)
        if self.recorder is not None:
            self.recorder.add("bot", "playback_cleared", outstanding_marks=sorted(self._requests))

    def echoed(self, name: str) -> MarkEvent:
        """Interpret Twilio's echo of mark ``name``."""
        request = self._requests.pop(name, None)
        if request is None:
            event = MarkEvent("unknown", name)
        else:
            kind: MarkKind = "cleared" if name in self._before_clear else "played"
            self._before_clear.discard(name)
            event = MarkEvent(kind, name, request.reply_id, request.context_id, request.audio_secs, request.final)
        self._emit(event)
        return event

    @property
    def outstanding(self) -> list[str]:
        """Names of marks sent and not yet echoed."""
        return list(self._requests)

    def heard_secs(self, context_id: str) -> float:
        """Seconds of a context's audio Twilio confirmed as played."""
        return max((e.audio_secs for e in self.events if e.kind == "played" and e.context_id == context_id),
                   default=0.0)

    def _emit(self, event: MarkEvent) -> None:
        self.events.append(event)
        if self.recorder is not None:
            self.recorder.add("bot", f"playback_mark_{event.kind}", name=event.name, reply_id=event.reply_id,
                              context_id=event.context_id, audio_secs=event.audio_secs, final=event.final)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a listener must never break the media path
                logger.exception("playback receipt listener failed")


class TwilioMarkRequester(FrameProcessor):
    """Ask Twilio for a mark every ``interval_secs`` of TTS audio and after each context's last audio.

    Place it right before ``transport.output()``: the mark travels as an
    ``OutputTransportMessageFrame`` through the output transport's audio queue,
    so it is sent after the audio that precedes it (up to one audio chunk,
    ~40 ms, may still be buffered in the transport).

    Args:
        stream_sid: The Twilio stream the marks belong to.
        receipts: Where requests are recorded.
        interval_secs: Audio between two marks of one context.
    """

    def __init__(self, stream_sid: str, receipts: PlaybackReceipts, *, interval_secs: float = 0.5,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stream_sid = stream_sid
        self._receipts = receipts
        self._interval = interval_secs
        self._sent_secs: dict[str | None, float] = {}
        self._marked_secs: dict[str | None, float] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Forward every frame; follow TTS audio with marks."""
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if direction != FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, InterruptionFrame):
            self._sent_secs.clear()
            self._marked_secs.clear()
        elif isinstance(frame, TTSAudioRawFrame):
            context = frame.context_id
            secs = self._sent_secs.get(context, 0.0) + len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)
            self._sent_secs[context] = secs
            if secs - self._marked_secs.get(context, 0.0) >= self._interval:
                await self._mark(context, final=False)
        elif isinstance(frame, TTSStoppedFrame) and frame.context_id in self._sent_secs:
            if self._sent_secs[frame.context_id] > self._marked_secs.get(frame.context_id, 0.0):
                await self._mark(frame.context_id, final=True)
            self._sent_secs.pop(frame.context_id, None)
            self._marked_secs.pop(frame.context_id, None)

    async def _mark(self, context_id: str | None, *, final: bool) -> None:
        secs = self._sent_secs.get(context_id, 0.0)
        self._marked_secs[context_id] = secs
        name = self._receipts.requested(context_id, secs, final=final).name
        message = {"event": "mark", "streamSid": self._stream_sid, "mark": {"name": name}}
        await self.push_frame(OutputTransportMessageFrame(message=message))


class MarkingTwilioSerializer(TwilioFrameSerializer):
    """``TwilioFrameSerializer`` that reports mark echoes and ``clear`` messages to :class:`PlaybackReceipts`.

    Args:
        receipts: The call's receipts.
        *args: Passed to ``TwilioFrameSerializer``.
        **kwargs: Passed to ``TwilioFrameSerializer``.
    """

    def __init__(self, *args: Any, receipts: PlaybackReceipts, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receipts = receipts

    async def serialize(self, frame: Frame) -> str | bytes | None:
        """Serialize as Pipecat does; note each ``clear`` sent on interruption."""
        payload = await super().serialize(frame)
        if isinstance(frame, InterruptionFrame) and payload:
            self.receipts.cleared()
        return payload

    async def deserialize(self, data: str | bytes) -> Frame | None:
        """Deserialize as Pipecat does; consume ``mark`` echoes into the receipts."""
        if isinstance(data, str) and '"mark"' in data:
            try:
                message = json.loads(data)
            except json.JSONDecodeError:
                message = None
            if isinstance(message, dict) and message.get("event") == "mark":
                name = str((message.get("mark") or {}).get("name", ""))
                self.receipts.echoed(name)
                return None
        return await super().deserialize(data)
