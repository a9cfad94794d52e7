"""ElevenLabs multi-stream-input websocket on loopback, for ``ElevenLabsTTSService(url=...)``.

It takes the messages Pipecat sends (context init, text, ``flush``, keep-alives, ``close_context``, ``close_socket``).
Each text is synthesized as silent 16-bit PCM whose length follows a speaking rate, streamed back one word per message
with its character alignment (restarting at zero in each message), faster than real time by ``synthesis_speed``. A
closed context gets ``{"isFinal": true}`` once its queued text is synthesized.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from pipecat_harness.fakes.server import LoopbackServer
from pipecat_harness.fakes.speech import PUNCTUATION_PAUSE, speech_duration

__all__ = ["ElevenLabsFake", "SynthesizedWord"]


@dataclass(frozen=True)
class SynthesizedWord:
    """A word the fake synthesized, with offsets from the start of its context's audio."""

    word: str
    start: float
    end: float


@dataclass
class _Context:
    texts: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    offset: float = 0.0
    task: asyncio.Task[Any] | None = None


def _message_kind(data: dict[str, Any]) -> str:
    flag = next((flag for flag in ("close_socket", "close_context", "flush") if data.get(flag)), None)
    text = data.get("text")
    return flag or ("keepalive" if text == "" else "init" if text == " " else "text")


class ElevenLabsFake(LoopbackServer):
    """An ElevenLabs TTS websocket on 127.0.0.1, for ``ElevenLabsTTSService(api_key=..., url=fake.url, ...)``.

    ``on_words`` is called with ``(context_id, words)`` as each text is laid out (the ground truth of what plays).
    """

    def __init__(self, *, words_per_minute: float = 165.0, first_audio_secs: float = 0.2, synthesis_speed: float = 4.0,
                 on_words: Callable[[str, list[SynthesizedWord]], None] | None = None, **kwargs: Any) -> None:
        super().__init__("elevenlabs", **kwargs)
        self.words_per_minute = words_per_minute
        self.first_audio_secs = first_audio_secs
        self.synthesis_speed = max(0.1, synthesis_speed)
        self._on_words = on_words
        self.connections = 0

    @property
    def url(self) -> str:
        """The websocket root to give ``ElevenLabsTTSService(url=...)``."""
        return f"ws://{self.host}"

    def routes(self, app: web.Application) -> None:
        """The multi-stream-input websocket."""
        app.router.add_get("/v1/text-to-speech/{voice}/multi-stream-input", self._handle)

    async def _handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        output = request.query.get("output_format", "pcm_24000")
        rate = int(output[4:]) if output.startswith("pcm_") and output[4:].isdigit() else 24000
        api_key = bool(request.headers.get("xi-api-key"))
        connect = {"voice": request.match_info["voice"], "query": dict(request.query), "api_key": api_key}
        self.record("received", "connect", connect)
        contexts: dict[str, _Context] = {}
        send_lock = asyncio.Lock()

        async def send(message: dict[str, Any], kind: str) -> None:
            async with send_lock:
                if ws.closed:
                    return
                logged = {k: v for k, v in message.items() if k != "audio"}
                if "audio" in message:
                    logged["audio_bytes"] = len(base64.b64decode(message["audio"]))
                self.record("sent", kind, logged)
                await ws.send_str(json.dumps(message))

        async def synthesize(context_id: str, context: _Context) -> None:
            while True:
                text = await context.texts.get()
                if text is None:
                    await send({"isFinal": True, "contextId": context_id}, "final")
                    return
                await self._speak(text, context_id, context, rate, send)

        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                data = json.loads(message.data)
                context_id = data.get("context_id")
                kind = _message_kind(data)
                self.record("received", kind, data)
                if kind == "close_socket":
                    break
                if context_id is None:
                    continue
                context = contexts.get(context_id)
                if context is None:
                    context = contexts[context_id] = _Context()
                    context.task = self.spawn(synthesize(context_id, context))
                if kind == "text":
                    await context.texts.put(str(data["text"]))
                elif kind == "close_context":
                    await context.texts.put(None)
        finally:
            for context in contexts.values():
                if context.task is not None:
                    context.task.cancel()
            await ws.close()
        return ws

    async def _speak(self, text: str, context_id: str, context: _Context, rate: int,
                     send: Callable[[dict[str, Any], str], Any]) -> None:
        layout = speech_duration(text, self.words_per_minute)
        if not layout:
            return
        # A word's audio runs to the next word's start; the last one's to its end and the pause after it.
        last_word, _, last_end = layout[-1]
        span_ends = [start for _, start, _ in layout[1:]] + [last_end + PUNCTUATION_PAUSE.get(last_word[-1], 0.0)]
        base = context.offset
        context.offset = base + span_ends[-1]
        if self._on_words is not None:
            self._on_words(context_id, [SynthesizedWord(w, base + s, base + e) for w, s, e in layout])
        if self.first_audio_secs and base == 0.0:
            # Latency is paid once per context: later texts queue behind the first and are synthesized back to back.
            await asyncio.sleep(self.first_audio_secs)
        for index, ((word, start, end), span_end) in enumerate(zip(layout, span_ends, strict=True)):
            # The word, then a space carrying the pause after it: the message's alignment spans exactly its audio.
            per_char = (end - start) / len(word)
            chars = list(word)
            starts = [round(i * per_char * 1000) for i in range(len(word))]
            durations = [round(per_char * 1000)] * len(word)
            if index + 1 < len(layout) or span_end > end:
                chars.append(" ")
                starts.append(round((end - start) * 1000))
                durations.append(round((span_end - end) * 1000))
            secs = (starts[-1] + durations[-1]) / 1000.0
            alignment = {"chars": chars, "charStartTimesMs": starts, "charDurationsMs": durations}
            audio = base64.b64encode(bytes(int(secs * rate) * 2)).decode()
            message = {"audio": audio, "contextId": context_id, "isFinal": None, "alignment": alignment}
            await send({**message, "normalizedAlignment": None}, "audio")
            await asyncio.sleep(secs / self.synthesis_speed)
