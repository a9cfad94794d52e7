"""A loopback HTTP and websocket server that a protocol fake runs on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

__all__ = ["Exchange", "LoopbackServer"]


@dataclass
class Exchange:
    """One message between the service under test and a fake.

    Parameters:
        provider: Which fake (``gemini``, ``openai``, ``deepgram``, ``elevenlabs``).
        direction: ``received`` (from the service) or ``sent`` (to it).
        kind: What it is (``request``, ``chunk``, ``Finalize``, ``audio``...).
        payload: The decoded message (JSON payloads as sent on the wire).
        t: Loop time when it happened.
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
    """Base of the protocol fakes: an aiohttp app on 127.0.0.1.

    Args:
        provider: Name used in :class:`Exchange` records.
        on_exchange: Called with every :class:`Exchange` as it happens (a trace recorder).
    """

    def __init__(self, provider: str, *, on_exchange: Callable[[Exchange], None] | None = None) -> None:
        self.provider = provider
        self.log: list[Exchange] = []
        self._on_exchange = on_exchange
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
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

    def received(self, kind: str | None = None) -> list[Any]:
        """Payloads received from the service, optionally of one kind."""
        return [e.payload for e in self.log if e.direction == "received" and (kind is None or e.kind == kind)]

    def sent(self, kind: str | None = None) -> list[Any]:
        """Payloads sent to the service, optionally of one kind."""
        return [e.payload for e in self.log if e.direction == "sent" and (kind is None or e.kind == kind)]

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
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port or 0)
        await self._site.start()
        server = self._site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop serving and cancel the fake's own tasks."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
