"""Per-call coordination on a :class:`StateStore`: a TTL lock and a newest-wins debounce.

Both work the same whether the store is in-process memory or Redis shared by
several worker processes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pipecat_harness.state.store import StateStore

__all__ = ["CallLock", "LockTimeout", "TranscriptDebouncer"]

T = TypeVar("T")


class LockTimeout(TimeoutError):
    """The per-call lock could not be taken in time."""


class CallLock:
    """A per-call lock whose time-to-live exceeds the work it guards.

    The guarded work runs under ``work_timeout_secs``; the lock lives for
    ``ttl_secs`` which must be strictly larger, so the lock cannot expire
    (and let a second worker in) while the first is still working. A
    crashed holder's lock expires after ``ttl_secs``.

    Args:
        store: Where the lock lives.
        ttl_secs: Lock lifetime.
        work_timeout_secs: Longest the guarded work may run.
        acquire_timeout_secs: Longest to wait for the lock.
        poll_secs: Wait between attempts while another worker holds it.

    Raises:
        ValueError: ``ttl_secs`` does not exceed ``work_timeout_secs``.
    """

    def __init__(
        self,
        store: StateStore,
        *,
        ttl_secs: float = 15.0,
        work_timeout_secs: float = 10.0,
        acquire_timeout_secs: float = 12.0,
        poll_secs: float = 0.01,
    ) -> None:
        if ttl_secs <= work_timeout_secs:
            raise ValueError(
                f"lock ttl_secs ({ttl_secs}) must exceed work_timeout_secs ({work_timeout_secs}) "
                "or the lock could expire while the work still runs"
            )
        self.store = store
        self.ttl_secs = ttl_secs
        self.work_timeout_secs = work_timeout_secs
        self.acquire_timeout_secs = acquire_timeout_secs
        self.poll_secs = poll_secs

    async def run(self, call_id: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work()`` while holding the lock for ``call_id``.

        Raises:
            LockTimeout: The lock was not obtained within ``acquire_timeout_secs``.
            TimeoutError: The work took longer than ``work_timeout_secs``.
        """
        key = f"lock:{call_id}"
        token = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_secs
        while not await self.store.acquire(key, token, self.ttl_secs):
            if loop.time() >= deadline:
                raise LockTimeout(f"call {call_id!r}: lock busy for {self.acquire_timeout_secs}s")
            await asyncio.sleep(self.poll_secs)
        try:
            async with asyncio.timeout(self.work_timeout_secs):
                return await work()
        finally:
            await self.store.release(key, token)


class TranscriptDebouncer:
    """Newest-wins debounce of transcripts per call.

    Each utterance offers its timestamp; after ``delay_secs`` only the one
    whose timestamp is still the newest goes on to the (expensive) model
    call. A superseded partial bails out without any model call.

    Args:
        store: Where the newest timestamp per call lives.
        delay_secs: How long to wait for a newer utterance.
        ttl_secs: Lifetime of the stored timestamp.
    """

    def __init__(self, store: StateStore, *, delay_secs: float = 0.3, ttl_secs: float = 3600.0) -> None:
        self.store = store
        self.delay_secs = delay_secs
        self.ttl_secs = ttl_secs

    async def settle(self, call_id: str, stamp: float) -> bool:
        """Offer ``stamp`` and wait; True when it is still the newest afterwards."""
        key = f"debounce:{call_id}"
        if not await self.store.offer_newest(key, stamp, ttl_secs=self.ttl_secs):
            return False
        if self.delay_secs > 0:
            await asyncio.sleep(self.delay_secs)
        return await self.is_newest(call_id, stamp)

    async def is_newest(self, call_id: str, stamp: float) -> bool:
        """Whether no newer timestamp than ``stamp`` has been offered."""
        newest = await self.store.newest(f"debounce:{call_id}")
        return newest is None or newest <= stamp
