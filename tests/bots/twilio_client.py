"""Twilio's side of a media stream, for the bots' end-to-end tests."""

from __future__ import annotations

import base64
import json
from typing import Any

from pipecat_harness.fakes import GeminiFake

__all__ = ["TwilioClient", "capture", "streamed_text"]

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
