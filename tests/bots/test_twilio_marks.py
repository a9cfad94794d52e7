"""Mark receipts: which echoes prove playback, and the serializer and requester around them."""

from __future__ import annotations

import json

import pytest
from pipecat.frames.frames import (
    InputDTMFFrame,
    InterruptionFrame,
    OutputTransportMessageFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.tests.utils import run_test

from bots.twilio_marks import MarkingTwilioSerializer, PlaybackReceipts, TwilioMarkRequester
from pipecat_harness.history.marks import parse_mark
from pipecat_harness.trace.recorder import TraceRecorder

SID = "MZ00000000000000000000000000000001"


def _serializer(receipts: PlaybackReceipts) -> MarkingTwilioSerializer:
    inner = TwilioFrameSerializer(stream_sid=SID, params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
    return MarkingTwilioSerializer(inner, receipts=receipts)


def test_echo_before_a_clear_is_played_and_after_a_clear_is_not_proof() -> None:
    recorder = TraceRecorder()
    receipts = PlaybackReceipts(recorder)
    seen = []
    receipts.add_listener(seen.append)
    receipts.sent("ph:1:500")
    receipts.sent("ph:1:1000")
    assert receipts.echoed("ph:1:500").kind == "played"
    receipts.cleared()
    assert receipts.echoed("ph:1:1000").kind == "cleared"
    receipts.sent("ph:2:250")
    assert receipts.echoed("ph:2:250").kind == "played"
    assert receipts.echoed("ph:9:9").kind == "unknown"
    assert receipts.heard_secs(1) == 0.5 and receipts.heard_secs(2) == 0.25
    assert receipts.outstanding == []
    assert [e.kind for e in seen] == ["sent", "sent", "played", "cleared", "sent", "played", "unknown"]
    trace = [e.kind for e in recorder.events]
    assert "playback_cleared" in trace and trace.count("playback_mark_played") == 2


def test_a_failing_listener_does_not_break_receipts() -> None:
    receipts = PlaybackReceipts()
    receipts.add_listener(lambda event: 1 / 0)  # type: ignore[arg-type,func-returns-value]
    receipts.sent("ph:1:100")
    assert receipts.echoed("ph:1:100").kind == "played"


async def test_serializer_consumes_mark_echoes_and_notes_marks_and_clears() -> None:
    receipts = PlaybackReceipts()
    serializer = _serializer(receipts)
    mark = {"event": "mark", "streamSid": SID, "mark": {"name": "ph:1:480"}}
    assert json.loads(await serializer.serialize(OutputTransportMessageFrame(message=mark))) == mark  # type: ignore[arg-type]
    clear = await serializer.serialize(InterruptionFrame())
    assert json.loads(clear) == {"event": "clear", "streamSid": SID}  # type: ignore[arg-type]
    assert await serializer.deserialize(json.dumps({**mark, "sequenceNumber": "9"})) is None
    assert [(e.kind, e.name) for e in receipts.events] == [("sent", "ph:1:480"), ("cleared", "ph:1:480")]
    # Everything else still goes through Pipecat's Twilio serializer.
    dtmf = await serializer.deserialize(json.dumps({"event": "dtmf", "streamSid": SID, "dtmf": {"digit": "5"}}))
    assert isinstance(dtmf, InputDTMFFrame) and dtmf.button.value == "5"


async def test_requester_marks_every_interval_and_at_the_end_of_a_reply() -> None:
    requester = TwilioMarkRequester(SID, interval_secs=0.25)
    chunk = bytes(int(0.1 * 8000) * 2)  # 100 ms at 8 kHz
    frames = [TTSAudioRawFrame(chunk, 8000, 1, context_id="ctx-a") for _ in range(6)]
    frames.append(TTSStoppedFrame(context_id="ctx-a"))
    down, _ = await run_test(requester, frames_to_send=frames)
    names = [f.message["mark"]["name"] for f in down if isinstance(f, OutputTransportMessageFrame)]
    assert [parse_mark(n).played_secs for n in names] == [0.3, 0.6]  # type: ignore[union-attr]
    # Each mark follows the audio it covers.
    kinds = [type(f).__name__ for f in down]
    assert kinds.index("OutputTransportMessageFrame") == 3


async def test_requester_stands_down_when_inactive() -> None:
    requester = TwilioMarkRequester(SID, interval_secs=0.05)
    requester.active = False
    frames = [TTSAudioRawFrame(bytes(1600), 8000, 1, context_id="c"), TTSStoppedFrame(context_id="c")]
    down, _ = await run_test(requester, frames_to_send=frames)
    assert not any(isinstance(f, OutputTransportMessageFrame) for f in down)


def test_receipts_wrap_the_serializer_a_transport_was_built_with_once() -> None:
    from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams

    from bots.twilio_marks import add_playback_receipts

    inner = TwilioFrameSerializer(stream_sid=SID, params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
    params = FastAPIWebsocketParams(serializer=inner)
    receipts = add_playback_receipts(params)
    assert isinstance(params.serializer, MarkingTwilioSerializer) and params.serializer.inner is inner
    assert add_playback_receipts(params) is receipts  # a second call keeps the one wrapper
    with pytest.raises(ValueError, match="TwilioFrameSerializer"):
        add_playback_receipts(FastAPIWebsocketParams())
