"""A Twilio call through Pipecat's development runner: ``bot()`` builds its transport with ``create_transport``.

The runner hands the bot a ``WebSocketRunnerArguments`` holding the media
stream; the bot asks ``create_transport`` for the transport (which reads
Twilio's ``start`` message and builds Pipecat's ``TwilioFrameSerializer``
from it), then wraps that serializer so Twilio's mark echoes become playback
receipts. Driven here by a client speaking Twilio's media-stream protocol,
with the bot's real services against the loopback fakes.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, WebSocket
from fastapi.testclient import TestClient
from pipecat.runner.types import WebSocketRunnerArguments
from pipecat.serializers.twilio import TwilioFrameSerializer

import bots.agent as agent_module
from bots.settings import BotSettings
from bots.twilio_marks import MarkingTwilioSerializer
from pipecat_harness.config import HarnessConfig
from pipecat_harness.fakes import DeepgramFake, ElevenLabsFake, GeminiFake
from pipecat_harness.fakes.background import serve_in_background
from pipecat_harness.history.marks import parse_mark
from tests.bots.twilio_client import (
    RECORDING,
    TwilioClient,
    capture,
    greet_then_answer,
    hear_greeting_then_ask,
)

CALLER = "I want to return order W two three seven eight one five six."
ANSWER = "I can help with that return. Let me find the order first, and then we will see which items can go back."



def test_runner_twilio_call_uses_create_transport_and_keeps_marks(
    bot_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_TURN_STOP", "speech_timeout")
    # The runner's serializer can hang up through Twilio's REST API, so it needs credentials; a hang-up would be
    # recorded here instead of reaching Twilio.
    monkeypatch.setenv("TWILIO_ACCOUNT_SID", "AC00000000000000000000000000000000")
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", "dummy-token")
    hung_up: list[str | None] = []

    async def record_hang_up(self: TwilioFrameSerializer) -> None:
        hung_up.append(self._call_sid)

    monkeypatch.setattr(TwilioFrameSerializer, "_hang_up_call", record_hang_up)
    settings = BotSettings.from_env()
    monkeypatch.setattr(agent_module, "_STARTUP", (settings, HarnessConfig().with_controls(history=True)))
    gemini, deepgram = GeminiFake(greet_then_answer(CALLER, ANSWER)), DeepgramFake(finalize_delay_secs=0.05)
    voice = ElevenLabsFake(words_per_minute=300, synthesis_speed=8.0, first_audio_secs=0.05)
    real_create_services = agent_module.create_services
    monkeypatch.setattr(agent_module, "create_services", lambda s, **kw: real_create_services(
        s, **kw, deepgram_base_url=deepgram.base_url, gemini_http_options=gemini.http_options(),
        elevenlabs_url=voice.url))
    built: dict[str, Any] = {}
    real_build_agent = agent_module.build_agent

    async def keep_agent(transport: Any, **kwargs: Any) -> Any:
        built["transport"], built["agent"] = transport, await real_build_agent(transport, **kwargs)
        return built["agent"]

    monkeypatch.setattr(agent_module, "build_agent", keep_agent)

    app = FastAPI()

    @app.websocket("/ws")
    async def media_stream(websocket: WebSocket) -> None:  # what Pipecat's runner does for a telephony socket
        await websocket.accept()
        runner_args = WebSocketRunnerArguments(websocket=websocket, session_id=str(uuid.uuid4()))
        runner_args.handle_sigint = runner_args.handle_sigterm = False
        try:
            await agent_module.bot(runner_args)
        except Exception as exc:
            built["error"] = f"{type(exc).__name__}: {exc}"

    recording = json.loads(RECORDING.read_text(encoding="utf-8"))
    outcome: dict[str, Any] = {}

    def call() -> None:
        with TestClient(app) as client, client.websocket_connect("/ws") as ws:
            twilio = outcome["twilio"] = TwilioClient(ws, recording)
            twilio.open(recording)
            hear_greeting_then_ask(twilio, deepgram, gemini, outcome, caller=CALLER, answer=ANSWER,
                                   greeting_marks=2)
            heard = len(twilio.marks())
            twilio.until(lambda: len(twilio.marks()) >= heard + 2)
            ws.send_text(json.dumps(twilio.stop))
            ws.close()
            outcome["stage"] = "hang-up"
            deadline = time.monotonic() + 20
            while not ("agent" in built and built["agent"].worker.has_finished()) and time.monotonic() < deadline:
                time.sleep(0.05)

    with serve_in_background(gemini, deepgram, voice):
        runner = threading.Thread(target=capture(call, outcome), daemon=True)
        runner.start()
        runner.join(120)
    assert not runner.is_alive(), f"no end within 120 s ({built.get('error')}, at {outcome.get('stage')})"
    assert "error" not in outcome and "error" not in built, (outcome.get("error"), built.get("error"))

    start = next(e for e in recording if e["event"] == "start")["start"]
    transport = built["transport"]
    serializer = transport.input()._params.serializer
    # Pipecat's runner built the transport and its serializer from Twilio's start message; the bot only wrapped it.
    assert isinstance(serializer, MarkingTwilioSerializer) and type(serializer.inner) is TwilioFrameSerializer
    assert serializer.inner._stream_sid == start["streamSid"]
    assert built["agent"].worker.has_finished()
    assert hung_up == []  # the caller hung up first: nothing for the bot to end through Twilio's REST API
    # Marks went out after the bot's audio; their echoes are the history control's receipts.
    marks = [parse_mark(m["mark"]["name"]) for m in outcome["twilio"].marks()]
    assert marks and all(m is not None and m.played_secs > 0 for m in marks)
    tracker = built["agent"].harness.control("history").tracker
    receipts = {r.reply_id: r.receipt_secs for r in tracker.replies if r.marks_sent}
    assert len(receipts) >= 2 and all(secs and secs > 0 for secs in receipts.values())
    header = json.loads(built["agent"].trace_path.read_text(encoding="utf-8").splitlines()[0])
    assert header.get("bot") == "runner-twilio" and header.get("call_id") == start["callSid"]
