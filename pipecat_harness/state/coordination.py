"""Per-call coordination on a :class:`StateStore` (memory or Redis): a renewed, fenced lease lock and a debounce."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pipecat_harness.state.store import NewestGate, StateStore

__all__ = ["CallLock", "HeldLock", "LockLost", "LockTimeout", "Superseded", "TranscriptDebouncer"]

T = TypeVar("T")


class LockTimeout(TimeoutError):
    """The per-call lock could not be taken in time."""


class Superseded(RuntimeError):
    """A newer stamp than the work's own was offered; the work was not run."""


class LockLost(RuntimeError):
    """The lock expired or passed to another worker while the work ran; its write was refused."""


# (lock, key, token) of the lock the running work holds, for fenced writes.
_HELD: contextvars.ContextVar[tuple[CallLock, str, str] | None] = contextvars.ContextVar("_held_lock", default=None)


class CallLock:
    """A per-call lease, renewed every third of ``ttl_secs`` while its work runs, with writes fenced by its token.

    A killed worker's lock frees itself within ``ttl_secs``; work that lost its lock cannot overwrite newer state.
    """

    def __init__(self, store: StateStore, *, ttl_secs: float = 1.0, work_timeout_secs: float = 10.0,
                 acquire_timeout_secs: float | None = None, poll_secs: float = 0.01) -> None:
        if ttl_secs <= 0 or work_timeout_secs <= 0 or poll_secs <= 0:
            raise ValueError("lock ttl_secs, work_timeout_secs and poll_secs must be positive")
        self.store = store
        self.ttl_secs = ttl_secs
        self.work_timeout_secs = work_timeout_secs
        self.acquire_timeout_secs = max(3 * ttl_secs, 2.0) if acquire_timeout_secs is None else acquire_timeout_secs
        self.poll_secs = poll_secs

    async def run(self, call_id: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work()`` while holding (and renewing) the lock for ``call_id`` (see :meth:`run_reading`)."""
        return await self.run_reading(call_id, (), lambda _values: work())

    async def run_reading(self, call_id: str, keys: Sequence[str],
                          work: Callable[[tuple[Any | None, ...]], Awaitable[T]], *,
                          gate: NewestGate | None = None) -> T:
        """Take the lock and read ``keys`` in one store operation (one Redis round trip), then run ``work(values)``.

        With a ``gate`` it runs only while no newer stamp is stored (else :class:`Superseded`); raises
        :class:`LockTimeout`, ``TimeoutError`` past ``work_timeout_secs``, :class:`LockLost` on a write after losing it.
        """
        held = await self.acquire_reading(call_id, keys, gate=gate)
        context = _HELD.set((self, held.key, held.token))
        try:
            async with asyncio.timeout(self.work_timeout_secs):
                return await work(held.values)
        finally:
            _HELD.reset(context)
            await held.release()

    async def acquire_reading(self, call_id: str, keys: Sequence[str], *, gate: NewestGate | None = None) -> HeldLock:
        """Take the lock and read ``keys`` as :meth:`run_reading` does, for work that continues in another task.

        Renewed until :meth:`HeldLock.release`, for at most ``work_timeout_secs``; a busy lock is polled, not retried.
        """
        key, token = f"lock:{call_id}", secrets.token_hex(16)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_secs
        while True:
            claim = await self.store.acquire_and_read(key, token, self.ttl_secs, keys, gate=gate)
            if claim.superseded:
                raise Superseded(f"call {call_id!r}: a newer utterance than {gate.stamp if gate else '?'} arrived")
            if claim.acquired:
                return HeldLock(self, key, token, claim.values)
            if gate is not None and gate.offer:
                gate = dataclasses.replace(gate, offer=False)  # offered once; later attempts only check it
            if loop.time() >= deadline:
                raise LockTimeout(f"call {call_id!r}: lock busy for {self.acquire_timeout_secs}s")
            await asyncio.sleep(self.poll_secs)

    async def write(self, key: str, value: Any, *, ttl_secs: float | None = None) -> None:
        """Store ``value``; inside :meth:`run` only while this work still holds the lock (else ``LockLost``)."""
        held = _HELD.get()
        if held is None or held[0] is not self:
            await self.store.set_json(key, value, ttl_secs=ttl_secs)
        else:
            await _fenced_write(self.store, key, value, ttl_secs, held[1], held[2])


async def _fenced_write(store: StateStore, key: str, value: Any, ttl_secs: float | None, lock_key: str,
                        token: str) -> None:
    if not await store.set_json_fenced(key, value, ttl_secs=ttl_secs, lock_key=lock_key, token=token):
        raise LockLost(f"{lock_key}: the lock passed to another worker; the write of {key!r} was refused")


class HeldLock:
    """A taken :class:`CallLock`: the values read with it, fenced writes, release; renewed by a timer, not a task."""

    def __init__(self, lock: CallLock, key: str, token: str, values: tuple[Any | None, ...]) -> None:
        self.lock = lock
        self.key = key
        self.token = token
        self.values = values
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + lock.work_timeout_secs
        self._renewing: asyncio.Task[None] | None = None
        self._released = False
        self._timer: asyncio.TimerHandle | None = loop.call_later(lock.ttl_secs / 3, self._renew_due)

    def _renew_due(self) -> None:
        self._timer = None
        if not self._released and asyncio.get_running_loop().time() < self._deadline:
            self._renewing = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        # Not taken: another worker holds it now (our writes will be refused), or it is being released.
        if await self.lock.store.acquire(self.key, self.token, self.lock.ttl_secs) and not self._released:
            self._timer = asyncio.get_running_loop().call_later(self.lock.ttl_secs / 3, self._renew_due)

    async def write(self, key: str, value: Any, *, ttl_secs: float | None = None) -> None:
        """Store ``value`` only while this lock is still held (else ``LockLost``, and nothing is written)."""
        await _fenced_write(self.lock.store, key, value, ttl_secs, self.key, self.token)

    async def release(self) -> None:
        """Stop renewing and release the lock (only if this token still holds it); later calls do nothing."""
        if self._released:
            return
        self._released = True
        if self._timer is not None:
            self._timer.cancel()
        if self._renewing is not None:  # a renewal in flight must land first, or it would take the lock again
            with contextlib.suppress(Exception):
                await asyncio.shield(self._renewing)
        await self.lock.store.release(self.key, self.token)


class TranscriptDebouncer:
    """Newest-wins debounce of transcripts per call: after ``delay_secs`` only the newest utterance goes on."""

    def __init__(self, store: StateStore, *, delay_secs: float = 0.3, ttl_secs: float = 3600.0) -> None:
        self.store = store
        self.delay_secs = delay_secs
        self.ttl_secs = ttl_secs

    @staticmethod
    def _key(call_id: str) -> str:
        return f"debounce:{call_id}"

    def gate(self, call_id: str, stamp: float, *, offer: bool = False) -> NewestGate:
        """The check "``stamp`` is still the newest" (offered first when ``offer``) for a lock's first operation."""
        return NewestGate(self._key(call_id), stamp, offer=offer, ttl_secs=self.ttl_secs)

    async def offer(self, call_id: str, stamp: float) -> bool:
        """Record ``stamp`` when it is the newest; False when a newer one is already there."""
        return await self.store.offer_newest(self._key(call_id), stamp, ttl_secs=self.ttl_secs)

    async def settle(self, call_id: str, stamp: float) -> bool:
        """Offer ``stamp`` and wait; True when it is still the newest afterwards."""
        if not await self.offer(call_id, stamp):
            return False
        if self.delay_secs <= 0:
            return True  # no wait, so nothing newer to look for (a round trip less on the first-token path)
        await asyncio.sleep(self.delay_secs)
        return await self.is_newest(call_id, stamp)

    async def is_newest(self, call_id: str, stamp: float) -> bool:
        """Whether no newer timestamp than ``stamp`` has been offered."""
        newest = await self.store.newest(self._key(call_id))
        return newest is None or newest <= stamp
