"""``QuietWindow``: work that can wait starts once turns stop arriving and their model requests are out.

When a hundred turns arrive in the same instant, each one's model request
waits for the CPU work of every turn ahead of it on the event loop. Saving a
turn's checklist state is needed only before that turn's answer ends, so it
should not run between two other turns' arrival and their model requests.
A quiet window holds such work until every turn held in it has its model
request out and has had it out for ``quiet_secs`` without a new turn
arriving (or, under a steady stream of turns, until the oldest held work has
waited ``max_wait_secs``), then lets all of it start together. Arrivals alone are
not enough: under a burst the model requests go out some milliseconds after
the last turn has been decided (new upstream connections take several turns
of the loop), and the held work would run in between.
"""

from __future__ import annotations

import asyncio

__all__ = ["QuietWindow"]


class QuietWindow:
    """Gate for deferrable work on one event loop.

    Args:
        quiet_secs: How long every held turn's model request must have been out, with no new
            turn arriving, before held work starts.
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
        """Note an arrival; the returned event is set when the work held with it may start.

        Pass the event to :meth:`sent` once the turn's model request is out
        (until then the window stays shut, for at most ``max_wait_secs``).
        """
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
                # Quiet from now on unless another turn arrives (it holds the window until its own request is out).
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
