"""The Twilio server offline: TwiML for the incoming call, and a recorded media stream through the real pipeline.

The provider services are replaced by the simulator's scripted LLM and
simulated TTS and a recording STT; Twilio auto hang-up is off, so nothing
leaves the process.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bots.settings import BotSettings
from bots.twilio_bot import CallRecord, create_app, twilio_signature, twiml_for_stream
from pipecat_harness.cli import main as cli_main
from pipecat_harness.config import HarnessConfig
from pipecat_harness.history.marks import parse_mark
from pipecat_harness.placement import flatten
from pipecat_harness.trace.timeline import Timeline
from tests.bots.bot_fakes import RecordingSTTService, fake_services

RECORDING = Path(__file__).parent / "data" / "twilio_media_stream.json"


def _app(settings: BotSettings, config: HarnessConfig | None = None, **kwargs: Any) -> Any:
    kwargs.setdefault("auth_token", "")
    return create_app(settings_factory=lambda: settings, services_factory=lambda _s: fake_services(),
                      harness_config=config, auto_hang_up=False, mark_interval_secs=0.25, **kwargs)


def test_twilio_signature_matches_twilios_published_example() -> None:
    params = {"CallSid": "CA1234567890ABCDE", "Caller": "+14158675310", "Digits": "1234",
              "From": "+14158675310", "To": "+18005551212"}
    assert twilio_signature("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", params) == (
        "GvWf1cFY/Q7PnoempGyD5oXAezc="
    )


def test_webhook_requests_must_carry_a_valid_twilio_signature_when_a_token_is_set(settings: BotSettings) -> None:
    client = TestClient(_app(settings, auth_token="secret-token", public_host="voice.example.com"))
    body = "CallSid=CA123&From=%2B15551230000&To=%2B15559870000"
    params = {"CallSid": "CA123", "From": "+15551230000", "To": "+15559870000"}
    form = {"content-type": "application/x-www-form-urlencoded"}
    signed = twilio_signature("secret-token", "https://voice.example.com/", params)
    assert client.post("/", content=body, headers={**form, "x-twilio-signature": signed}).status_code == 200
    forged = twilio_signature("wrong-token", "https://voice.example.com/", params)
    for headers in (form, {**form, "x-twilio-signature": forged}):
        response = client.post("/", content=body, headers=headers)
        assert response.status_code == 403 and "Twilio signature" in response.text
    tampered = body.replace("To=%2B15559870000", "To=%2B15550000000")
    assert client.post("/", content=tampered, headers={**form, "x-twilio-signature": signed}).status_code == 403


def test_incoming_call_webhook_answers_twiml_with_a_media_stream(settings: BotSettings) -> None:
    client = TestClient(_app(settings))
    response = client.post(
        "/",
        content="CallSid=CA123&From=%2B15551230000&To=%2B15559870000&AccountSid=AC1",
        headers={"content-type": "application/x-www-form-urlencoded", "host": "bot.example.ngrok.app"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/xml")
    root = ET.fromstring(response.text)
    assert root.tag == "Response"
    (connect,) = list(root)
    assert connect.tag == "Connect"
    (stream,) = list(connect)
    assert stream.tag == "Stream"
    assert stream.attrib["url"] == "wss://bot.example.ngrok.app/ws"
    params = {p.attrib["name"]: p.attrib["value"] for p in stream.findall("Parameter")}
    assert params == {"from_number": "+15551230000", "to_number": "+15559870000"}


def test_configured_public_host_wins_and_values_are_escaped(settings: BotSettings) -> None:
    client = TestClient(_app(settings, public_host="voice.example.com"))
    form = {"content-type": "application/x-www-form-urlencoded"}
    response = client.post("/", content="From=%22%3E%3Cx", headers=form)
    stream = ET.fromstring(response.text).find("Connect/Stream")
    assert stream is not None and stream.attrib["url"] == "wss://voice.example.com/ws"
    assert stream.find("Parameter").attrib["value"] == '"><x'  # type: ignore[union-attr]
    assert ET.fromstring(twiml_for_stream("wss://h/ws")).find("Connect/Stream").findall("Parameter") == []  # type: ignore[union-attr]


def _replay_call(
    app: Any, *, marks_to_echo: int = 2, max_messages: int = 5000
) -> tuple[list[dict[str, Any]], CallRecord]:
    """Replay the recorded stream; echo the first marks the bot requests, as Twilio does once they played."""
    recording = json.loads(RECORDING.read_text(encoding="utf-8"))
    head = [e for e in recording if e["event"] in ("connected", "start", "media")]
    mark_template, stop = (next(e for e in recording if e["event"] == kind) for kind in ("mark", "stop"))
    received: list[dict[str, Any]] = []
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        for event in head:
            ws.send_text(json.dumps(event))
        echoed = 0
        while echoed < marks_to_echo:
            assert len(received) < max_messages, "the bot never asked for a playback mark"
            message = json.loads(ws.receive_text())
            received.append(message)
            if message["event"] == "mark":
                echo = {**mark_template, "mark": {"name": message["mark"]["name"]}}
                ws.send_text(json.dumps(echo))
                echoed += 1
        ws.send_text(json.dumps(stop))
        ws.close()  # Twilio closes the socket after "stop"; the bot must end the call by itself
        deadline = time.monotonic() + 20
        while not app.state.bot.calls and time.monotonic() < deadline:
            time.sleep(0.05)
    assert app.state.bot.calls, "the call did not end after the stream closed"
    return received, app.state.bot.calls[0]


@pytest.mark.parametrize("history", [True, False], ids=["history-tracker-marks", "requester-marks"])
def test_recorded_media_stream_runs_a_call_with_playback_receipts(
    settings: BotSettings, bot_env: Path, history: bool
) -> None:
    config = HarnessConfig().with_controls(history=history)
    app = _app(settings, config)
    received, record = _replay_call(app)
    assert record.error is None
    assert record.call_sid == "CA2b8c5b4e8f9d4e1a9a3c7d6e5f4a3b21"

    # Caller audio reached the STT as 16 kHz PCM (Smart Turn's rate), decoded from 8 kHz μ-law.
    stt = record.agent.services.stt
    assert isinstance(stt, RecordingSTTService)
    assert stt.sample_rates == {16000}
    assert stt.audio_bytes >= 16000  # at least half of the second of recorded audio

    # The greeting went out as Twilio media on the call's stream, followed by marks in the harness's format.
    media = [m for m in received if m["event"] == "media"]
    marks = [m for m in received if m["event"] == "mark"]
    assert media and all(m["streamSid"] == "MZ18ad3ab5a668481ce02b83e7395059f0" for m in media + marks)
    assert received.index(media[0]) < received.index(marks[0])
    decoded = [parse_mark(m["mark"]["name"]) for m in marks]
    assert all(d is not None and d.played_secs > 0 for d in decoded)

    kinds = [(e.kind, e.name) for e in record.receipts.events]
    for mark in marks:
        assert ("sent", mark["mark"]["name"]) in kinds
        assert ("played", mark["mark"]["name"]) in kinds
    assert record.receipts.heard_secs(decoded[-1].reply_id) == pytest.approx(decoded[-1].played_secs)  # type: ignore[union-attr]

    history_control = record.agent.harness.control("history")
    if history:
        reply = next(r for r in history_control.tracker.replies if r.reply_id == decoded[-1].reply_id)  # type: ignore[union-attr]
        assert reply.marks_sent
        assert reply.receipt_secs == pytest.approx(decoded[-1].played_secs)  # type: ignore[union-attr]
        assert flatten(record.agent.processors)[-1] is history_control.corrector
    else:
        assert history_control is None

    # The call's trace is written like a simulated one and `trace show` reads it.
    assert record.trace_path == bot_env / "traces" / "CA2b8c5b4e8f9d4e1a9a3c7d6e5f4a3b21.jsonl"
    timeline = Timeline.load(record.trace_path)
    trace_kinds = [e.kind for e in timeline.events]
    assert trace_kinds[0] == "call_started"
    assert {"generated", "bot_started_speaking", "playback_mark_sent", "playback_mark_played"} <= set(trace_kinds)
    assert cli_main(["trace", "show", str(record.trace_path)]) == 0


def test_a_websocket_that_is_not_a_twilio_stream_is_closed_without_a_call(settings: BotSettings) -> None:
    app = _app(settings)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"event": "hello"}))
        ws.send_text(json.dumps({"event": "world"}))
        closed = ws.receive()
        assert closed["type"] == "websocket.close"
    assert app.state.bot.calls == []
