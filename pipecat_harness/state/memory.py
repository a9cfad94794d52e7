"""In-process :class:`StateStore` for single-process deployments and tests."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

from pipecat_harness.state.store import StateStore, StoreError

__all__ = ["MemoryStateStore"]


class MemoryStateStore(StateStore):
    """Dictionary-backed store; every operation is atomic within one event loop.

    Operations never await between reading and writing, so on a single loop
    they cannot interleave. Values are copied through JSON on write so a
    caller mutating its object afterwards cannot change the stored state.

    Args:
        clock: Monotonic time source used for expiry (injectable for tests).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[Any, float | None]] = {}

    def _live(self, key: str) -> Any | None:
        item = self._values.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and self._clock() >= expires:
            del self._values[key]
            return None
        return value

    def _put(self, key: str, value: Any, ttl_secs: float | None) -> None:
        expires = None if ttl_secs is None else self._clock() + ttl_secs
        self._values[key] = (value, expires)

    async def get_json(self, key: str) -> Any | None:
        """Return a copy of the value under ``key``."""
        return copy.deepcopy(self._live(key))

    async def set_json(self, key: str, value: Any, *, ttl_secs: float | None = None) -> None:
        """Store a JSON round-tripped copy of ``value``."""
        try:
            stored = json.loads(json.dumps(value))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"value for {key!r} is not JSON-serialisable: {exc}") from exc
        self._put(key, stored, ttl_secs)

    async def delete(self, key: str) -> None:
        """Remove ``key``."""
        self._values.pop(key, None)

    async def offer_newest(self, key: str, stamp: float, *, ttl_secs: float | None = None) -> bool:
        """Keep the largest stamp; True when ``stamp`` is the newest."""
        current = self._live(key)
        if current is not None and float(current) > stamp:
            return False
        self._put(key, float(stamp), ttl_secs)
        return True

    async def newest(self, key: str) -> float | None:
        """Return the newest stamp."""
        current = self._live(key)
        return None if current is None else float(current)

    async def acquire(self, key: str, token: str, ttl_secs: float) -> bool:
        """Take the lock if free or expired."""
        holder = self._live(key)
        if holder is not None and holder != token:
            return False
        self._put(key, token, ttl_secs)
        return True

    async def release(self, key: str, token: str) -> bool:
        """Release only our own lock."""
        if self._live(key) != token:
            return False
        del self._values[key]
        return True
