"""``QuietWindow``: work that can wait starts once turns stop arriving and their model requests are out.

Under a burst each model request waits for the CPU work ahead of it on the loop; a turn's state save is only
needed before its answer ends, so it waits until every held turn's request is out (new connections take a
few loop turns after the last decision).
"""

from __future__ import annotations

import asyncio

__all__ = ["QuietWindow"]


class QuietWindow:
    """Gate for deferrable work on one event loop.

    Args:
        quiet_secs: How long every held model request must be out, with no new arrival, before held work starts.
        max_wait_secs: Longest any work is held, however busy the loop stays.

    Raises:
        ValueError: A negative time, or ``max_wait_secs`` below ``quiet_secs``.
    """

    def __init__(self, *, quiet_secs: float = 0.005, max_wait_secs: float = 0.05) -> None:
        if quiet_secs < 0 or max_wait_secs < quiet_secs:
            raise ValueError("quiet_secs must be >= 0 and max_wait_secs >= quiet_secs")
        self.quiet_secs = quiet_secs
        self.max_wait_secs = max_wait_secs
        self._open: asyncio.Event | None = None
        self._first_at = 0.0
        self._unsent = 0
        self._timer: asyncio.TimerHandle | None = None

    def hold(self) -> asyncio.Event:
        """Note an arrival; the event is set when the work held with it may start (pass it to :meth:`sent`)."""
        if self._open is None:
            loop = asyncio.get_running_loop()
            self._open = asyncio.Event()
            self._first_at = loop.time()
            self._unsent = 0
            self._timer = loop.call_at(self._first_at + self.max_wait_secs, self._due)
        self._unsent += 1
        return self._open

    def sent(self, window: asyncio.Event) -> None:
        """The model request of a turn held in ``window`` is out (or will not go out)."""
        if window is self._open and self._unsent:
            self._unsent -= 1
            if not self._unsent:
                loop = asyncio.get_running_loop()
                if self._timer is not None:
                    self._timer.cancel()
                due = min(loop.time() + self.quiet_secs, self._first_at + self.max_wait_secs)
                self._timer = loop.call_at(due, self._due)

    def _due(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        deadline = self._first_at + self.max_wait_secs
        if self._unsent and loop.time() < deadline:
            self._timer = loop.call_at(deadline, self._due)  # the last sent() re-arms it sooner
            return
        self.release()

    def release(self) -> None:
        """Let all held work start now (the next arrival opens a new window)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        event, self._open = self._open, None
        if event is not None:
            event.set()
