"""Twilio's side of a media stream, for the bots' end-to-end tests."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipecat_harness.fakes import ChatReply, ChatRequest, DeepgramFake, GeminiFake

__all__ = [
    "GREETING",
    "RECORDING",
    "TwilioClient",
    "capture",
    "greet_then_answer",
    "hear_greeting_then_ask",
    "streamed_text",
]

RECORDING = Path(__file__).parent / "data" / "twilio_media_stream.json"
GREETING = "Hello, this is the store. How can I help with your order?"
SILENCE = base64.b64encode(b"\xff" * 160).decode()  # 20 ms of μ-law silence at 8 kHz


class TwilioClient:
    """Twilio's side of the media stream: sends silence, echoes marks, records what the bot sent."""

    def __init__(self, ws: Any, recording: list[dict[str, Any]]) -> None:
        self.ws = ws
        self.received: list[dict[str, Any]] = []
        self.mark_template = next(e for e in recording if e["event"] == "mark")
        self.stop = next(e for e in recording if e["event"] == "stop")
        self.media = next(e for e in recording if e["event"] == "media")
        self.sequence = 10

    def open(self, recording: list[dict[str, Any]]) -> None:
        for event in recording:
            if event["event"] in ("connected", "start"):
                self.ws.send_text(json.dumps(event))
        for _ in range(25):
            self.send_silence()

    def send_silence(self) -> None:
        self.sequence += 1
        media = {**self.media["media"], "payload": SILENCE, "chunk": str(self.sequence),
                 "timestamp": str(self.sequence * 20)}
        self.ws.send_text(json.dumps({**self.media, "sequenceNumber": str(self.sequence), "media": media}))

    def marks(self) -> list[dict[str, Any]]:
        return [m for m in self.received if m["event"] == "mark"]

    def until(self, done: Any) -> None:
        while not done():
            message = json.loads(self.ws.receive_text())
            self.received.append(message)
            if message["event"] == "mark":
                self.ws.send_text(json.dumps({**self.mark_template, "mark": {"name": message["mark"]["name"]}}))
            elif message["event"] == "media":
                self.send_silence()  # the caller's line stays open while the bot talks


def streamed_text(gemini: GeminiFake) -> str:
    return "".join(p.get("text", "") for chunk in gemini.sent("chunk") for c in chunk["candidates"]
                   for p in c["content"]["parts"])


def capture(function: Any, outcome: dict[str, Any]) -> Any:
    def run() -> None:
        try:
            function()
        except BaseException as exc:  # reported by the test thread
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    return run


def greet_then_answer(caller: str, answer: str) -> Callable[[ChatRequest], ChatReply]:
    """A model brain for the Gemini fake: the greeting, then ``answer`` once the caller's words are a user turn."""

    def brain(request: ChatRequest) -> ChatReply:
        asked = any(caller in str(m.get("content")) for m in request.messages if m["role"] == "user")
        return ChatReply(text=answer if asked else GREETING)

    return brain


def hear_greeting_then_ask(
    twilio: TwilioClient,
    deepgram: DeepgramFake,
    gemini: GeminiFake,
    outcome: dict[str, Any],
    *,
    caller: str,
    answer: str,
    greeting_marks: int,
) -> None:
    """The caller hears the greeting, says ``caller`` (an interim, then the final), and hears ``answer`` begin."""
    outcome["stage"] = "greeting"
    twilio.until(lambda: any(m["event"] == "media" for m in twilio.received) and len(twilio.marks()) >= greeting_marks)
    assert deepgram.loop is not None
    outcome["stage"] = "caller speaks"
    deepgram.expect_final(caller)
    interim = " ".join(caller.split()[:4])
    asyncio.run_coroutine_threadsafe(deepgram.interim(interim), deepgram.loop).result(5)
    time.sleep(0.8)  # the rest of the sentence, then the recogniser's endpoint
    asyncio.run_coroutine_threadsafe(deepgram.final(), deepgram.loop).result(5)
    twilio.until(lambda: answer in streamed_text(gemini))
    outcome["stage"] = "answer plays"
