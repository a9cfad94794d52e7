"""``Turnstile``: at most one turn's decision starts per turn of the event loop.

A burst's handlers all run in one loop turn, and a request is written only when the loop next polls its
sockets; one decision per loop turn lets each model request go out right after its own decision.
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
