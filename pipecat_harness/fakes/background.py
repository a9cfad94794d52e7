"""Serving fakes from a thread of their own, for a bot that runs its own event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from pipecat_harness.fakes.server import LoopbackServer

__all__ = ["serve_in_background"]


@contextmanager
def serve_in_background(*fakes: LoopbackServer, timeout_secs: float = 10.0) -> Iterator[tuple[LoopbackServer, ...]]:
    """Start ``fakes`` on a background thread's loop (their ports bound on entry); stop them on exit.

    Their logs may be read from the calling thread (appends are atomic).
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pipecat-harness-fakes", daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout_secs)

    try:
        for fake in fakes:
            run(fake.start())
        yield fakes
    finally:
        for fake in fakes:
            with suppress(Exception):  # stopping is best effort: the thread goes away regardless
                run(fake.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_secs)
        loop.close()
