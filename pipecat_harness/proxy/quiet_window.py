"""``QuietWindow``: work that can wait starts once requests stop arriving for a moment.

When a hundred turns arrive in the same instant, each one's model request
waits for the CPU work of every turn ahead of it on the event loop. Saving a
turn's checklist state is needed only before that turn's answer ends, so it
should not run between two other turns' arrival and their model requests.
A quiet window holds such work until no new turn has arrived for
``quiet_secs`` (or, under a steady stream of turns, until the oldest held work
has waited ``max_wait_secs``), then lets all of it start together.
"""

from __future__ import annotations

import asyncio

__all__ = ["QuietWindow"]


class QuietWindow:
    """Gate for deferrable work on one event loop.

    Args:
        quiet_secs: How long no new turn must arrive before held work starts.
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
        self._timer: asyncio.TimerHandle | None = None

    def hold(self) -> asyncio.Event:
        """Note an arrival; the returned event is set when the work held with it may start."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._open is None:
            self._open = asyncio.Event()
            self._first_at = now
        event = self._open
        if self._timer is not None:
            self._timer.cancel()
        wait = min(self.quiet_secs, max(0.0, self._first_at + self.max_wait_secs - now))
        self._timer = loop.call_later(wait, self.release)
        return event

    def release(self) -> None:
        """Let all held work start now (the next arrival opens a new window)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        event, self._open = self._open, None
        if event is not None:
            event.set()
