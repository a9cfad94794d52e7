"""A loopback HTTP and websocket server that a protocol fake runs on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from pipecat_harness.fakes.chat import ChatModel, ChatReply, ChatRequest, as_chat_model

__all__ = ["Exchange", "LoopbackServer", "ModelServer"]


@dataclass
class Exchange:
    """One message between the service under test and a fake.

    Parameters:
        provider: Which fake (``gemini``, ``openai``, ``deepgram``, ``elevenlabs``).
        direction: ``received`` (from the service) or ``sent`` (to it).
        kind: What it is (``request``, ``chunk``, ``Finalize``, ``audio``...).
        payload: The decoded message.
        t: Loop time.
    """

    provider: str
    direction: str
    kind: str
    payload: Any
    t: float = field(default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"provider": self.provider, "direction": self.direction, "kind": self.kind, "payload": self.payload}


class LoopbackServer:
    """Base of the protocol fakes: an aiohttp app on 127.0.0.1 logging every :class:`Exchange` (to ``on_exchange``)."""

    def __init__(self, provider: str, *, on_exchange: Callable[[Exchange], None] | None = None) -> None:
        self.provider = provider
        self.log: list[Exchange] = []
        self._on_exchange = on_exchange
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.port = 0

    def routes(self, app: web.Application) -> None:
        """Add the fake's routes to ``app`` (subclasses)."""
        raise NotImplementedError

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The API root to give the service's ``base_url``."""
        return f"http://{self.host}"

    def record(self, direction: str, kind: str, payload: Any) -> Exchange:
        """Keep one exchange in :attr:`log` and pass it to the listener."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            now = time.monotonic()
        exchange = Exchange(self.provider, direction, kind, payload, now)
        self.log.append(exchange)
        if self._on_exchange is not None:
            self._on_exchange(exchange)
        return exchange

    def _payloads(self, direction: str, kind: str | None) -> list[Any]:
        return [e.payload for e in self.log if e.direction == direction and kind in (None, e.kind)]

    def received(self, kind: str | None = None) -> list[Any]:
        """Payloads received from the service, optionally of one kind."""
        return self._payloads("received", kind)

    def sent(self, kind: str | None = None) -> list[Any]:
        """Payloads sent to the service, optionally of one kind."""
        return self._payloads("sent", kind)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run ``coro`` as a task the server cancels when it stops."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def start(self) -> Self:
        """Bind to a free port on 127.0.0.1 and serve."""
        self.loop = asyncio.get_running_loop()
        app = web.Application()
        self.routes(app)
        # No access log: a simulated call makes many requests.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        """Stop serving and cancel the fake's own tasks."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class ModelServer(LoopbackServer):
    """A model API fake answering from a :class:`ChatModel` (a function of the request, or replies in order)."""

    def __init__(self, provider: str, model: Any, **kwargs: Any) -> None:
        super().__init__(provider, **kwargs)
        self.model: ChatModel = as_chat_model(model)
        self.requests: list[ChatRequest] = []

    async def answer(self, chat: ChatRequest) -> ChatReply:
        """Keep ``chat`` in :attr:`requests` and ask the model."""
        self.requests.append(chat)
        return await self.model.reply(chat)

    @staticmethod
    async def event_stream(request: web.Request) -> web.StreamResponse:
        """A prepared server-sent-event response to ``request``."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        return response

    @staticmethod
    def token_counts(chat: ChatRequest | None, reply: ChatReply) -> tuple[int, int]:
        """Stand-ins for the prompt and output token counts: words, and 5 per tool call."""
        prompt = sum(len(str(m.get("content") or "").split()) for m in chat.messages) if chat else 0
        return prompt, len(reply.text.split()) + 5 * len(reply.tool_calls)
