"""Twilio ``mark`` events as playback receipts.

Twilio plays the audio a bot sends from its own buffer. A ``mark`` message
sent after some audio is echoed back once that audio has been played to the
caller; after a ``clear`` (barge-in) the marks still pending come back too,
although their audio was discarded. So an echo counts as "played" only for a
mark sent after the latest ``clear``.

Mark names follow the history controls' format (``ph:<reply>:<milliseconds>``,
:mod:`pipecat_harness.history.marks`). Who asks for marks:

* with the ``history`` control on, its ``PlaybackTracker`` (after the output
  transport) requests them, and echoes go back to it
  (:meth:`TwilioCall.attach` in ``twilio_bot.py`` wires both);
* with it off, :class:`TwilioMarkRequester` (right before the output
  transport) requests them, so the call's trace still gets receipts.

:class:`MarkingTwilioSerializer` wraps Pipecat's ``TwilioFrameSerializer`` and
reports every mark sent, every echo and every ``clear`` to
:class:`PlaybackReceipts`, which writes them on the call's trace and tells its
listeners.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    OutputTransportMessageFrame,
    OutputTransportMessageUrgentFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor, FrameProcessorSetup
from pipecat.serializers.base_serializer import FrameSerializer
from pipecat.serializers.twilio import TwilioFrameSerializer

from pipecat_harness.history.marks import format_mark, parse_mark, twilio_mark_message, twilio_mark_name
from pipecat_harness.trace.recorder import TraceRecorder

__all__ = [
    "MarkEvent",
    "MarkingTwilioSerializer",
    "PlaybackReceipts",
    "TwilioMarkRequester",
    "add_playback_receipts",
]

MarkKind = Literal["sent", "played", "cleared", "unknown"]


@dataclass(frozen=True)
class MarkEvent:
    """A mark sent to Twilio, or its echo.

    Parameters:
        kind: ``sent``; ``played`` (echoed: the audio before it was heard);
            ``cleared`` (echoed after a ``clear``: that audio may have been
            discarded); ``unknown`` (an echo of a name this call never sent).
        name: The mark's name on the wire.
        reply_id: The assistant reply the mark belongs to (0 for foreign names).
        audio_secs: Seconds of that reply's audio sent before the mark.
    """

    kind: MarkKind
    name: str
    reply_id: int = 0
    audio_secs: float = 0.0


MarkListener = Callable[[MarkEvent], None]


class PlaybackReceipts:
    """The marks of one call and what their echoes mean.

    Args:
        recorder: The call's trace recorder; mark events go on its ``bot`` lane.
    """

    def __init__(self, recorder: TraceRecorder | None = None) -> None:
        self.recorder = recorder
        self.events: list[MarkEvent] = []
        self._listeners: list[MarkListener] = []
        self._outstanding: dict[str, MarkEvent] = {}
        self._before_clear: set[str] = set()

    def add_listener(self, listener: MarkListener) -> None:
        """Call ``listener`` with every :class:`MarkEvent`."""
        self._listeners.append(listener)

    def sent(self, name: str) -> MarkEvent:
        """Note a mark message going out to Twilio."""
        mark = parse_mark(name)
        event = MarkEvent("sent", name, mark.reply_id if mark else 0, mark.played_secs if mark else 0.0)
        self._outstanding[name] = event
        self._emit(event)
        return event

    def cleared(self) -> None:
        """A ``clear`` went out: marks still outstanding will echo without proof of playback."""
        self._before_clear.update(self._outstanding)
        if self.recorder is not None:
            self.recorder.add("bot", "playback_cleared", outstanding_marks=sorted(self._outstanding))

    def echoed(self, name: str) -> MarkEvent:
        """Interpret Twilio's echo of mark ``name``."""
        request = self._outstanding.pop(name, None)
        if request is None:
            event = MarkEvent("unknown", name)
        else:
            kind: MarkKind = "cleared" if name in self._before_clear else "played"
            self._before_clear.discard(name)
            event = MarkEvent(kind, name, request.reply_id, request.audio_secs)
        self._emit(event)
        return event

    @property
    def outstanding(self) -> list[str]:
        """Names of marks sent and not yet echoed."""
        return list(self._outstanding)

    def heard_secs(self, reply_id: int) -> float:
        """Seconds of a reply's audio Twilio confirmed as played."""
        return max((e.audio_secs for e in self.events if e.kind == "played" and e.reply_id == reply_id), default=0.0)

    def _emit(self, event: MarkEvent) -> None:
        self.events.append(event)
        if self.recorder is not None:
            self.recorder.add("bot", f"playback_mark_{event.kind}", name=event.name, reply_id=event.reply_id,
                              audio_secs=event.audio_secs)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a listener must never break the media path
                logger.exception("playback receipt listener failed")


class TwilioMarkRequester(FrameProcessor):
    """Ask Twilio for a mark every ``interval_secs`` of a TTS reply's audio and after its last audio.

    Place it right before ``transport.output()``: the mark travels as an
    ``OutputTransportMessageFrame`` through the output transport's audio
    queue, so it is sent after the audio that precedes it (up to one audio
    chunk, ~40 ms, may still be buffered in the transport). Set
    :attr:`active` to ``False`` when another processor requests the marks.

    Args:
        stream_sid: The Twilio stream the marks belong to.
        interval_secs: Audio between two marks of one reply.
    """

    def __init__(self, stream_sid: str, *, interval_secs: float = 0.5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.active = True
        self._stream_sid = stream_sid
        self._interval = interval_secs
        self._reply_ids: dict[str | None, int] = {}
        self._sent_secs: dict[str | None, float] = {}
        self._marked_secs: dict[str | None, float] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Forward every frame; follow TTS audio with marks."""
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if not self.active or direction != FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, InterruptionFrame):
            self._sent_secs.clear()
            self._marked_secs.clear()
        elif isinstance(frame, TTSAudioRawFrame):
            context = frame.context_id
            self._reply_ids.setdefault(context, len(self._reply_ids) + 1)
            secs = self._sent_secs.get(context, 0.0) + len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)
            self._sent_secs[context] = secs
            if secs - self._marked_secs.get(context, 0.0) >= self._interval:
                await self._mark(context)
        elif isinstance(frame, TTSStoppedFrame) and frame.context_id in self._sent_secs:
            if self._sent_secs[frame.context_id] > self._marked_secs.get(frame.context_id, 0.0):
                await self._mark(frame.context_id)
            self._sent_secs.pop(frame.context_id, None)
            self._marked_secs.pop(frame.context_id, None)

    async def _mark(self, context_id: str | None) -> None:
        secs = self._sent_secs.get(context_id, 0.0)
        self._marked_secs[context_id] = secs
        name = format_mark(self._reply_ids[context_id], secs)
        await self.push_frame(OutputTransportMessageFrame(message=twilio_mark_message(self._stream_sid, name)))


class MarkingTwilioSerializer(FrameSerializer):
    """Wraps the call's ``TwilioFrameSerializer``; reports every mark sent, mark echo and ``clear`` to receipts.

    A wrapper rather than a subclass, so the serializer Pipecat's runner builds
    in ``create_transport`` (with the call's SIDs and credentials) is the one on
    the wire: :func:`add_playback_receipts` swaps it for this wrapper in the
    transport's params before the pipeline starts.

    Args:
        inner: The serializer that speaks Twilio's protocol.
        receipts: The call's receipts.
    """

    def __init__(self, inner: FrameSerializer, *, receipts: PlaybackReceipts) -> None:
        super().__init__()
        self.inner = inner
        self.receipts = receipts

    async def setup(self, setup: FrameProcessorSetup) -> None:
        """Set the wrapped serializer up."""
        await self.inner.setup(setup)

    async def serialize(self, frame: Frame) -> str | bytes | None:
        """Serialize as Pipecat does; note each mark and ``clear`` going out."""
        payload = await self.inner.serialize(frame)
        if not payload:
            return payload
        if isinstance(frame, InterruptionFrame):
            self.receipts.cleared()
        elif isinstance(frame, (OutputTransportMessageFrame, OutputTransportMessageUrgentFrame)):
            name = twilio_mark_name(frame.message)
            if name is not None:
                self.receipts.sent(name)
        return payload

    async def deserialize(self, data: str | bytes) -> Frame | None:
        """Deserialize as Pipecat does; consume ``mark`` echoes into the receipts."""
        if isinstance(data, str) and '"mark"' in data:
            try:
                name = twilio_mark_name(json.loads(data))
            except json.JSONDecodeError:
                name = None
            if name is not None:
                self.receipts.echoed(name)
                return None
        return await self.inner.deserialize(data)


def add_playback_receipts(params: Any) -> PlaybackReceipts:
    """Wrap the Twilio serializer in a transport's ``params`` so its marks become receipts.

    Call it after the transport was built (``create_transport`` sets
    ``params.serializer``) and before the pipeline starts: the websocket
    transport reads its serializer from these params at run time.

    Args:
        params: The ``FastAPIWebsocketParams`` the transport was built with.

    Returns:
        The receipts the wrapper reports to.

    Raises:
        ValueError: The params carry no Twilio serializer.
    """
    serializer = getattr(params, "serializer", None)
    if isinstance(serializer, MarkingTwilioSerializer):
        return serializer.receipts
    if not isinstance(serializer, TwilioFrameSerializer):
        raise ValueError(f"playback marks need a TwilioFrameSerializer, not {type(serializer).__name__}")
    receipts = PlaybackReceipts()
    params.serializer = MarkingTwilioSerializer(serializer, receipts=receipts)
    return receipts
