"""``StateStore``: the interface every per-call shared state goes through.

Per-call state that two workers may touch (checklist state, debounce
timestamps, locks) lives behind this small async interface. The in-process
:class:`~pipecat_harness.state.memory.MemoryStateStore` is the embedded
default; :class:`~pipecat_harness.state.redis_store.RedisStateStore` shares
the same operations across worker processes.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["JsonText", "LockedRead", "NewestGate", "StateStore", "StoreError", "dump_json", "parse_record"]

T = TypeVar("T")


class StoreError(RuntimeError):
    """The backing store failed or returned something that is not valid state."""


class JsonText(str):
    """A value already in its JSON form, written to a store as it is.

    A record that can encode itself in one pass (a pydantic adapter's
    ``dump_json``) passes this to ``set_json`` instead of a dictionary the
    store would encode again; reads give back the decoded value either way.
    """

    __slots__ = ()


def dump_json(key: str, value: Any) -> str:
    """``value`` as JSON text (a :class:`JsonText` as it is).

    Raises:
        StoreError: ``value`` is not JSON-serialisable.
    """
    if isinstance(value, JsonText):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"value for {key!r} is not JSON-serialisable: {exc}") from exc


def parse_record(raw: Any | None, parse: Callable[[Any], T], default: Callable[[], T], *, label: str) -> T:
    """``raw`` (a stored value, or ``None``) rebuilt by ``parse``, or ``default()`` when there is none.

    Raises:
        StoreError: The stored value is not a valid record (``parse`` raised ``ValueError``).
    """
    if raw is None:
        return default()
    try:
        return parse(raw)
    except ValueError as exc:
        raise StoreError(f"{label}: {exc}") from exc


@dataclass(frozen=True)
class NewestGate:
    """A newest-wins stamp checked, and optionally first offered, by the operation that takes a lock.

    Parameters:
        key: Where the newest stamp lives.
        stamp: This request's stamp.
        offer: Record ``stamp`` first when it is newer than the stored one.
        ttl_secs: Lifetime of an offered stamp.
    """

    key: str
    stamp: float
    offer: bool = False
    ttl_secs: float | None = None


@dataclass(frozen=True)
class LockedRead:
    """What :meth:`StateStore.acquire_and_read` found.

    Parameters:
        acquired: The lock is now held by the token.
        superseded: A newer stamp than the gate's is stored (the lock was not taken).
        values: The stored values of the keys asked for, in order (``None`` where absent);
            empty unless ``acquired``.
    """

    acquired: bool
    superseded: bool = False
    values: tuple[Any | None, ...] = ()


class StateStore(abc.ABC):
    """Async key-value store with the atomic operations per-call coordination needs.

    Keys are plain strings; implementations add their own namespace prefix.
    Values are JSON-serialisable objects.
    """

    @abc.abstractmethod
    async def get_json(self, key: str) -> Any | None:
        """Return the value stored under ``key``, or ``None``."""

    @abc.abstractmethod
    async def set_json(self, key: str, value: Any, *, ttl_secs: float | None = None) -> None:
        """Store ``value`` under ``key``, optionally expiring after ``ttl_secs``."""

    async def set_json_fenced(
        self, key: str, value: Any, *, ttl_secs: float | None = None, lock_key: str, token: str
    ) -> bool:
        """Store ``value`` only if ``token`` holds the lock ``lock_key``; returns whether it was stored.

        Backends override this with one atomic operation; this fallback
        re-takes the lock (which only the holder can) and then writes.
        """
        if not await self.acquire(lock_key, token, max(ttl_secs or 0.0, 1.0)):
            return False
        await self.set_json(key, value, ttl_secs=ttl_secs)
        return True

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""

    @abc.abstractmethod
    async def offer_newest(self, key: str, stamp: float, *, ttl_secs: float | None = None) -> bool:
        """Atomically record ``stamp`` if it is newer than the stored one.

        Returns:
            True when ``stamp`` is now the newest stamp for ``key`` (it was
            stored, or an equal stamp was already there).
        """

    @abc.abstractmethod
    async def newest(self, key: str) -> float | None:
        """Return the newest stamp recorded for ``key``."""

    @abc.abstractmethod
    async def acquire(self, key: str, token: str, ttl_secs: float) -> bool:
        """Take the lock ``key`` for ``token`` unless another token holds it.

        The lock expires by itself after ``ttl_secs`` so a crashed holder
        cannot block the call forever.
        """

    @abc.abstractmethod
    async def release(self, key: str, token: str) -> bool:
        """Release the lock ``key`` only if ``token`` still holds it."""

    async def acquire_and_read(
        self, lock_key: str, token: str, ttl_secs: float, keys: Sequence[str] = (), *, gate: NewestGate | None = None
    ) -> LockedRead:
        """Take a lock and read what the work under it starts from, as one operation.

        In order: offer the gate's stamp (when ``gate.offer``), give up when a
        newer stamp is stored (``superseded``), take ``lock_key`` for ``token``
        as :meth:`acquire` does, and read ``keys`` as :meth:`get_json` does.
        Backends override this with one atomic operation (one round trip on
        a network store); this fallback runs the single operations in turn,
        checking the stamp again once the lock is held.

        Raises:
            StoreError: A stored value is not JSON.
        """
        if gate is not None and gate.offer:
            if not await self.offer_newest(gate.key, gate.stamp, ttl_secs=gate.ttl_secs):
                return LockedRead(acquired=False, superseded=True)
        if not await self.acquire(lock_key, token, ttl_secs):
            return LockedRead(acquired=False)
        if gate is not None:
            newest = await self.newest(gate.key)
            if newest is not None and newest > gate.stamp:
                await self.release(lock_key, token)
                return LockedRead(acquired=False, superseded=True)
        return LockedRead(acquired=True, values=tuple([await self.get_json(key) for key in keys]))

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""
