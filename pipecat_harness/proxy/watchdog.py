"""``Watchdog``: a bound on each wait of a stream, with one timer per stream instead of one per token.

A wait only moves a deadline; past it while a wait is on, the task is cancelled and
:meth:`Watchdog.raise_if_expired` turns that into ``TimeoutError``.
"""

from __future__ import annotations

import asyncio

__all__ = ["Watchdog"]


class Watchdog:
    """Bounds the waits of the current task; built (and used) inside that task.

    Args:
        secs: The first wait's bound, counted from now.
    """

    def __init__(self, secs: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.deadline = self.loop.time() + secs
        self.waiting = False
        self.expired = False
        self.handle = self.loop.call_at(self.deadline, self._check)

    def wait(self, secs: float) -> None:
        """A wait starts now and may last at most ``secs``; set ``waiting`` to False when it is over."""
        self.deadline = self.loop.time() + secs
        self.waiting = True

    def _check(self) -> None:
        now = self.loop.time()
        if self.waiting and now >= self.deadline and self.task is not None:
            self.expired = True
            self.task.cancel()
            return
        self.handle = self.loop.call_at(max(self.deadline, now + 0.05), self._check)

    def raise_if_expired(self) -> None:
        """Turn the watchdog's own cancellation into ``TimeoutError`` (call it on ``CancelledError``)."""
        if self.expired and self.task is not None and self.task.uncancel() == 0:
            self.expired = False
            raise TimeoutError("no upstream chunk in time") from None

    def cancel(self) -> None:
        """Stop the timer (the stream is over)."""
        self.handle.cancel()
