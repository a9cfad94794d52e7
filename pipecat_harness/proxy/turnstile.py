"""``Turnstile``: at most one turn's decision starts per turn of the event loop.

When a hundred turns arrive in the same instant, the server runs all their
handlers in one turn of the loop. If each handler decides its checklist
directive there and then opens its upstream connection, every model request
waits for every decision of the burst: a connection completes, and a request
is written, only once the loop polls its sockets again, after the last
handler. Letting one decision start per turn of the loop puts a poll between
two decisions, so each turn's model request goes out a few loop turns after
its own decision rather than after the whole burst's. The work is the same;
only its order changes. A turn that arrives alone passes straight through.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Turnstile"]


class Turnstile:
    """FIFO admission, one entry per event-loop iteration, on one event loop."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._busy = False

    async def enter(self) -> None:
        """Return once this caller may start; at once if nobody else started in this loop iteration."""
        loop = asyncio.get_running_loop()
        if not self._busy:
            self._busy = True
            loop.call_soon(self._admit_next)  # the next entry, if any, no sooner than the next iteration
            return
        admitted = loop.create_future()
        self._waiting.append(admitted)
        await admitted

    def _admit_next(self) -> None:
        while self._waiting:
            admitted = self._waiting.popleft()
            if not admitted.done():  # (a caller cancelled while waiting is skipped)
                admitted.set_result(None)
                asyncio.get_running_loop().call_soon(self._admit_next)
                return
        self._busy = False
