"""Deepgram live transcription (``/v1/listen``) on loopback, for ``DeepgramSTTService(base_url=...)``.

The service streams binary audio and ``KeepAlive``/``Finalize``/``CloseStream`` messages; the fake answers ``Results``
as the Deepgram SDK parses them, ``UtteranceEnd`` when ``utterance_end_ms`` was asked for, and ``Metadata`` on
``CloseStream``. The words come from whoever drives the fake, not from the audio.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from pipecat_harness.fakes.server import LoopbackServer

__all__ = ["DeepgramFake"]

_MODEL_INFO = {"name": "fake-nova-3", "version": "loopback", "arch": "nova-3"}


@dataclass
class _Stream:
    ws: web.WebSocketResponse
    bytes_per_sec: float
    utterance_end_ms: int | None = None
    audio_bytes: int = 0
    utterance_start: float | None = None
    last_word_end: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def audio_secs(self) -> float:
        return self.audio_bytes / self.bytes_per_sec if self.bytes_per_sec else 0.0


def _timed_words(text: str, start: float, duration: float) -> list[dict[str, Any]]:
    tokens = text.split()
    step = duration / len(tokens) if tokens else 0.0
    return [{"word": t.strip(".,?!;:").lower() or t, "start": round(start + i * step, 3),
             "end": round(start + (i + 1) * step, 3), "confidence": 0.98, "punctuated_word": t}
            for i, t in enumerate(tokens)]


class DeepgramFake(LoopbackServer):
    """A Deepgram live-transcription websocket on 127.0.0.1, for ``DeepgramSTTService(base_url=fake.base_url)``."""

    def __init__(self, *, finalize_delay_secs: float = 0.1, **kwargs: Any) -> None:
        super().__init__("deepgram", **kwargs)
        self.finalize_delay_secs = finalize_delay_secs
        self._streams: list[_Stream] = []
        self._pending: str | None = None
        self._finalized = False
        self.connected = asyncio.Event()
        self.audio_bytes = 0

    def routes(self, app: web.Application) -> None:
        """The ``/v1/listen`` websocket."""
        app.router.add_get("/v1/listen", self._handle)

    async def interim(self, text: str) -> None:
        """Send an interim result for the utterance under way."""
        await self._results(text, is_final=False)

    def expect_final(self, text: str) -> None:
        """Set the transcript a ``Finalize`` (answered after ``finalize_delay_secs``) or the endpoint delivers."""
        self._pending = text
        self._finalized = False

    async def final(self, text: str | None = None) -> None:
        """Endpoint the utterance: its final result with ``speech_final`` (unless ``Finalize`` delivered it)."""
        text = self._pending if text is None else text
        self._pending = None
        if self._finalized:
            self._finalized = False
        elif text:
            await self._results(text, is_final=True, speech_final=True)
        for stream in self._streams:
            stream.utterance_start = None
            if stream.utterance_end_ms is not None:
                end = {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": round(stream.last_word_end, 3)}
                await self._send(stream, end, "UtteranceEnd")

    async def _send(self, stream: _Stream, message: dict[str, Any], kind: str) -> None:
        async with stream.lock:
            if not stream.ws.closed:
                self.record("sent", kind, message)
                await stream.ws.send_str(json.dumps(message))

    async def _results(self, text: str, *, is_final: bool, speech_final: bool = False,
                       from_finalize: bool = False) -> None:
        for stream in list(self._streams):
            now = stream.audio_secs
            if stream.utterance_start is None:
                stream.utterance_start = max(0.0, now - 0.5)
            start = stream.utterance_start
            duration = max(0.0, now - start)
            words = _timed_words(text, start, duration)
            if words:
                stream.last_word_end = words[-1]["end"]
            alternative = {"transcript": text, "confidence": 0.98 if text else 0.0, "words": words}
            metadata = {"request_id": str(uuid.uuid4()), "model_uuid": str(uuid.uuid4()), "model_info": _MODEL_INFO}
            message = {"type": "Results", "channel_index": [0, 1], "duration": round(duration, 3),
                       "start": round(start, 3), "is_final": is_final, "speech_final": speech_final,
                       "from_finalize": from_finalize, "channel": {"alternatives": [alternative]}, "metadata": metadata}
            await self._send(stream, message, "Results")

    async def _answer_finalize(self) -> None:
        await asyncio.sleep(self.finalize_delay_secs)
        text, self._pending = self._pending, None
        self._finalized = bool(text)
        # Deepgram answers every Finalize; with nothing pending the transcript is empty.
        await self._results(text or "", is_final=True, from_finalize=True)

    async def _handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        query = dict(request.query)
        channels = int(query.get("channels") or 1)
        end_ms = int(query["utterance_end_ms"]) if query.get("utterance_end_ms") else None
        stream = _Stream(ws, int(query.get("sample_rate") or 16000) * channels * 2, end_ms)
        authorization = bool(request.headers.get("Authorization"))
        self.record("received", "connect", {"query": query, "authorization": authorization})
        self._streams.append(stream)
        self.connected.set()
        try:
            async for message in ws:
                if message.type == WSMsgType.BINARY:
                    stream.audio_bytes += len(message.data)
                    self.audio_bytes += len(message.data)
                if message.type != WSMsgType.TEXT:
                    continue
                data = json.loads(message.data)
                kind = str(data.get("type", "unknown"))
                self.record("received", kind, data)
                if kind == "Finalize":
                    self.spawn(self._answer_finalize())
                elif kind == "CloseStream":
                    metadata = {"type": "Metadata", "transaction_key": "deprecated", "request_id": str(uuid.uuid4()),
                                "sha256": "0" * 64, "created": "2026-01-05T09:00:00.000Z",
                                "duration": round(stream.audio_secs, 3), "channels": channels}
                    await self._send(stream, metadata, "Metadata")
                    break
        finally:
            self._streams.remove(stream)
            await ws.close()
        return ws
