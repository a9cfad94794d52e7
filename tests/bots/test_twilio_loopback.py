"""A Twilio media-stream call end to end: Twilio's websocket protocol in, the bot's real services behind it.

A client speaks Twilio's media-stream protocol (``connected``, ``start``,
``media``, ``mark``, ``stop``) to the Twilio bot; the bot runs its own
``DeepgramSTTService``, ``GoogleLLMService`` and ``ElevenLabsTTSService``
(built by ``create_services``), pointed at the loopback fakes served from a
thread. The client echoes every mark the bot asks for, as Twilio does once
the audio before it played, and those receipts are what the history control
counts as heard. The caller's audio is μ-law silence (VAD stays quiet); what
the caller says is the Deepgram fake's transcript.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bots.agent import SYSTEM_PROMPT, create_services
from bots.settings import BotSettings
from bots.twilio_bot import create_app
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
    streamed_text,
)

CALLER = "Where is my order W two three seven eight one five six?"
ANSWER = "Let me look that up for you."



@pytest.fixture
def speech_timeout_settings(bot_env: Path, monkeypatch: pytest.MonkeyPatch) -> BotSettings:
    monkeypatch.setenv("BOT_TURN_STOP", "speech_timeout")
    return BotSettings.from_env()


def test_media_stream_call_with_marks_through_the_bots_real_services(speech_timeout_settings: BotSettings) -> None:
    recording = json.loads(RECORDING.read_text(encoding="utf-8"))
    gemini, deepgram = GeminiFake(greet_then_answer(CALLER, ANSWER)), DeepgramFake(finalize_delay_secs=0.05)
    voice = ElevenLabsFake(words_per_minute=300, synthesis_speed=8.0, first_audio_secs=0.05)
    outcome: dict[str, Any] = {}

    def call() -> None:
        app = create_app(
            settings_factory=lambda: speech_timeout_settings, auth_token="", auto_hang_up=False,
            mark_interval_secs=0.25, harness_config=HarnessConfig().with_controls(history=True),
            services_factory=lambda s: create_services(
                s, deepgram_base_url=deepgram.base_url, gemini_http_options=gemini.http_options(),
                elevenlabs_url=voice.url),
        )
        outcome["app"] = app
        with TestClient(app) as client, client.websocket_connect("/ws") as ws:
            twilio = outcome["twilio"] = TwilioClient(ws, recording)
            twilio.open(recording)
            hear_greeting_then_ask(twilio, deepgram, gemini, outcome, caller=CALLER, answer=ANSWER,
                                   greeting_marks=3)
            heard = len(twilio.marks())
            twilio.until(lambda: len(twilio.marks()) >= heard + 2)
            ws.send_text(json.dumps(twilio.stop))
            ws.close()
            deadline = time.monotonic() + 20
            while not app.state.bot.calls and time.monotonic() < deadline:
                time.sleep(0.05)
        outcome["done"] = True

    with serve_in_background(gemini, deepgram, voice):
        runner = threading.Thread(target=capture(call, outcome), daemon=True)
        runner.start()
        runner.join(120)
    twilio = outcome.get("twilio")
    seen = [m["event"] for m in twilio.received] if twilio else []
    assert not runner.is_alive(), (f"the call did not complete within 120 s (at {outcome.get('stage')}; bot sent "
                                   f"{len(seen)} messages, {seen.count('mark')} marks; {len(gemini.requests)} model "
                                   f"requests; streamed {streamed_text(gemini)!r})")
    assert "error" not in outcome, outcome.get("error")
    (record,) = outcome["app"].state.bot.calls
    assert record.error is None
    twilio = outcome["twilio"]

    # Gemini: the bot's prompt as system instruction on every run; the caller's words arrive as a user turn.
    bodies = gemini.received("request")
    assert all(SYSTEM_PROMPT.strip()[:40] in b["systemInstruction"]["parts"][0]["text"] for b in bodies)
    answered = next(b for b in bodies if CALLER in str(b["contents"]))
    assert any(CALLER in p.get("text", "") for c in answered["contents"] if c["role"] == "user" for p in c["parts"])
    # Deepgram got the caller's audio as 16 kHz linear PCM decoded from Twilio's 8 kHz μ-law.
    connect = deepgram.received("connect")[0]
    assert connect["query"]["sample_rate"] == "16000" and connect["query"]["encoding"] == "linear16"
    assert deepgram.audio_bytes >= 16000
    # ElevenLabs' audio went out as Twilio media, followed by marks; the echoed marks are history's receipts.
    assert any(e["alignment"] for e in voice.sent("audio"))
    marks = [parse_mark(m["mark"]["name"]) for m in twilio.marks()]
    assert marks and all(m is not None and m.played_secs > 0 for m in marks)
    tracker = record.agent.harness.control("history").tracker
    receipts = {r.reply_id: r.receipt_secs for r in tracker.replies if r.marks_sent}
    assert len(receipts) >= 2 and all(secs and secs > 0 for secs in receipts.values())
    for reply_id, secs in receipts.items():
        assert secs == pytest.approx(max(m.played_secs for m in marks if m is not None and m.reply_id == reply_id))
