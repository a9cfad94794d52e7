"""ElevenLabs multi-stream-input websocket on loopback, for ``ElevenLabsTTSService(url=...)``.

``/v1/text-to-speech/{voice}/multi-stream-input?model_id=...&output_format=pcm_<rate>`` takes the messages Pipecat
sends: a context init (``{"text": " ", "context_id", "voice_settings"}``), text (``{"text", "context_id"}``), ``flush``,
keep-alives (``{"text": ""}``), ``close_context`` and ``close_socket``. Each text is synthesized as silent 16-bit PCM
whose length follows a speaking rate, streamed back as ``{"audio", "alignment": {"chars", "charStartTimesMs",
"charDurationsMs"}, "contextId"}`` messages (one per word; alignment times restart at zero in each message and span
exactly its audio), faster than real time by ``synthesis_speed``. A closed context gets ``{"isFinal": true}`` once its
queued text is synthesized.
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


class ElevenLabsFake(LoopbackServer):
    """An ElevenLabs TTS websocket on 127.0.0.1.

    Point Pipecat at it with ``ElevenLabsTTSService(api_key=..., url=fake.url, ...)``.

    Args:
        words_per_minute: Speaking rate of the synthesized speech.
        first_audio_secs: Latency before a context's first audio.
        synthesis_speed: How much faster than real time audio is produced.
        on_words: Called with ``(context_id, words)`` as each text is laid out (ground truth).
        **kwargs: Passed to :class:`LoopbackServer`.
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
        rate = int(output.split("_", 1)[1]) if output.startswith("pcm_") and output[4:].isdigit() else 24000
        self.record("received", "connect", {"voice": request.match_info["voice"], "query": dict(request.query),
                                            "api_key": bool(request.headers.get("xi-api-key"))})
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
                kind = ("close_socket" if data.get("close_socket") else "close_context" if data.get("close_context")
                        else "flush" if data.get("flush") else "keepalive" if data.get("text") == ""
                        else "init" if data.get("text") == " " else "text")
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
                if context.task is not None and not context.task.done():
                    context.task.cancel()
            await ws.close()
        return ws

    async def _speak(self, text: str, context_id: str, context: _Context, rate: int,
                     send: Callable[[dict[str, Any], str], Any]) -> None:
        layout = speech_duration(text, self.words_per_minute)
        if not layout:
            return
        words = []
        for index, (word, start, end) in enumerate(layout):
            pause = PUNCTUATION_PAUSE.get(word[-1], 0.0)
            span_end = layout[index + 1][1] if index + 1 < len(layout) else end + pause
            words.append((word, start, end, span_end))
        base = context.offset
        context.offset = base + words[-1][3]
        if self._on_words is not None:
            self._on_words(context_id, [SynthesizedWord(w, base + s, base + e) for w, s, e, _ in words])
        if self.first_audio_secs and base == 0.0:
            # Latency is paid once per context: later texts queue behind the first and are synthesized back to back.
            await asyncio.sleep(self.first_audio_secs)
        for index, (word, start, end, span_end) in enumerate(words):
            # The word, then a space carrying the pause after it: the message's alignment spans exactly its audio.
            chars = list(word) + ([" "] if index + 1 < len(words) or span_end > end else [])
            per_char = (end - start) / len(word)
            starts = [round(i * per_char * 1000) for i in range(len(word))]
            durations = [round(per_char * 1000)] * len(word)
            if len(chars) > len(word):
                starts.append(round((end - start) * 1000))
                durations.append(round((span_end - end) * 1000))
            secs = (starts[-1] + durations[-1]) / 1000.0
            samples = int(secs * rate)
            audio = base64.b64encode(bytes(samples * 2)).decode()
            await send({"audio": audio, "contextId": context_id, "isFinal": None,
                        "alignment": {"chars": chars, "charStartTimesMs": starts, "charDurationsMs": durations},
                        "normalizedAlignment": None}, "audio")
            await asyncio.sleep(secs / self.synthesis_speed)
