"""``StateStore``: the async interface every per-call shared state (checklist state, debounce stamps, locks) uses."""

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
    """A value already in its JSON form (a pydantic ``dump_json``), written as it is instead of encoded again."""

    __slots__ = ()


def dump_json(key: str, value: Any) -> str:
    """Return ``value`` as JSON text (a :class:`JsonText` as it is; ``StoreError`` if not serialisable)."""
    if isinstance(value, JsonText):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"value for {key!r} is not JSON-serialisable: {exc}") from exc


def parse_record(raw: Any | None, parse: Callable[[Any], T], default: Callable[[], T], *, label: str) -> T:
    """Return ``parse(raw)``, or ``default()`` when ``raw`` is ``None`` (``StoreError`` if ``parse`` refuses it)."""
    if raw is None:
        return default()
    try:
        return parse(raw)
    except ValueError as exc:
        raise StoreError(f"{label}: {exc}") from exc


@dataclass(frozen=True)
class NewestGate:
    """A newest-wins ``stamp`` under ``key``, checked (first offered, if ``offer``) by the operation taking a lock."""

    key: str
    stamp: float
    offer: bool = False
    ttl_secs: float | None = None


@dataclass(frozen=True)
class LockedRead:
    """What :meth:`StateStore.acquire_and_read` found; ``values`` (those of the keys asked) only if ``acquired``."""

    acquired: bool
    superseded: bool = False
    values: tuple[Any | None, ...] = ()


class StateStore(abc.ABC):
    """Async key-value store of JSON values with the atomic operations per-call coordination needs."""

    @abc.abstractmethod
    async def get_json(self, key: str) -> Any | None:
        """Return the value stored under ``key``, or ``None``."""

    @abc.abstractmethod
    async def set_json(self, key: str, value: Any, *, ttl_secs: float | None = None) -> None:
        """Store ``value`` under ``key``, optionally expiring after ``ttl_secs``."""

    async def set_json_fenced(self, key: str, value: Any, *, ttl_secs: float | None = None, lock_key: str,
                              token: str) -> bool:
        """Store ``value`` only if ``token`` holds ``lock_key`` (this fallback re-takes the lock: only a holder can)."""
        if not await self.acquire(lock_key, token, max(ttl_secs or 0.0, 1.0)):
            return False
        await self.set_json(key, value, ttl_secs=ttl_secs)
        return True

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""

    @abc.abstractmethod
    async def offer_newest(self, key: str, stamp: float, *, ttl_secs: float | None = None) -> bool:
        """Atomically record ``stamp`` if newer than the stored one; True when it is now the newest (or equal)."""

    @abc.abstractmethod
    async def newest(self, key: str) -> float | None:
        """Return the newest stamp recorded for ``key``."""

    @abc.abstractmethod
    async def acquire(self, key: str, token: str, ttl_secs: float) -> bool:
        """Take the lock ``key`` for ``token`` unless another token holds it; it expires after ``ttl_secs``."""

    @abc.abstractmethod
    async def release(self, key: str, token: str) -> bool:
        """Release the lock ``key`` only if ``token`` still holds it."""

    async def acquire_and_read(self, lock_key: str, token: str, ttl_secs: float, keys: Sequence[str] = (), *,
                               gate: NewestGate | None = None) -> LockedRead:
        """Offer the gate's stamp, take ``lock_key``, read ``keys``: one operation (this fallback: step by step)."""
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
