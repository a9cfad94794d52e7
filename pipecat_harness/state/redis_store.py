"""Redis-backed :class:`StateStore`: every compare-then-write is one Lua script, so processes never race on it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipecat_harness.state.store import LockedRead, NewestGate, StateStore, StoreError, dump_json

__all__ = ["RedisStateStore"]

_OFFER_NEWEST = """
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) > tonumber(ARGV[1]) then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""

_SET_FENCED = """
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
else redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: the lock, the keys to read, then the gate's stamp key when ARGV[3] is 'check' or 'offer'.
# ARGV: token, lock lease (ms), gate mode ('' for none), stamp, stamp lifetime (ms, '' for none).
# Returns {1, 0, value...} when the lock is taken, {0, 0} when another token holds it, {0, 1} when superseded.
_ACQUIRE_AND_READ = """
local mode = ARGV[3]
local last = #KEYS
if mode ~= '' then
  local cur = redis.call('GET', KEYS[last])
  if cur and tonumber(cur) > tonumber(ARGV[4]) then return {0, 1} end
  if mode == 'offer' then
    if ARGV[5] ~= '' then redis.call('SET', KEYS[last], ARGV[4], 'PX', ARGV[5])
    else redis.call('SET', KEYS[last], ARGV[4]) end
  end
  last = last - 1
end
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {0, 0} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local out = {1, 0}
for i = 2, last do out[#out + 1] = redis.call('GET', KEYS[i]) or false end
return out
"""


def _ms(secs: float) -> int:
    return max(1, int(secs * 1000))


def _ttl_arg(secs: float | None) -> str:
    return "" if secs is None else str(_ms(secs))


def _decoded(key: str, raw: str | None) -> Any | None:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise StoreError(f"stored value for {key!r} is not JSON: {exc}") from exc


class RedisStateStore(StateStore):
    """Store on a Redis server (``redis.asyncio``, or ``client``), keys under ``prefix`` so deployments do not mix."""

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, prefix: str = "pipecat-harness:", client: Any = None):
        if client is None:
            try:
                import redis.asyncio as aioredis
            except ImportError as exc:  # pragma: no cover - depends on extras
                message = "the Redis store needs the 'redis' extra: pip install 'pipecat-harness[redis]'"
                raise StoreError(message) from exc
            client = aioredis.from_url(url, decode_responses=True)
        self._redis = client
        self.prefix = prefix
        scripts = (_OFFER_NEWEST, _RELEASE, _SET_FENCED, _ACQUIRE_AND_READ)
        self._offer, self._release, self._set_fenced, self._acquire_and_read = map(client.register_script, scripts)

    def _key(self, key: str) -> str:
        return self.prefix + key

    async def ping(self) -> None:
        """Raise :class:`StoreError` when the server cannot be reached."""
        try:
            await self._redis.ping()
        except Exception as exc:
            raise StoreError(f"Redis not reachable: {exc}") from exc

    async def get_json(self, key: str) -> Any | None:
        """Return the decoded JSON value under ``key``."""
        return _decoded(key, await self._redis.get(self._key(key)))

    async def acquire_and_read(self, lock_key: str, token: str, ttl_secs: float, keys: Sequence[str] = (), *,
                               gate: NewestGate | None = None) -> LockedRead:
        """Offer/check the gate's stamp, take the lock and read ``keys`` in one script: one round trip."""
        names = [self._key(lock_key), *(self._key(key) for key in keys)]
        mode, stamp, stamp_ttl = "", "", ""
        if gate is not None:
            names.append(self._key(gate.key))
            mode = "offer" if gate.offer else "check"
            stamp, stamp_ttl = repr(float(gate.stamp)), _ttl_arg(gate.ttl_secs)
        reply = await self._acquire_and_read(keys=names, args=[token, str(_ms(ttl_secs)), mode, stamp, stamp_ttl])
        if not int(reply[0]):
            return LockedRead(acquired=False, superseded=bool(int(reply[1])))
        return LockedRead(acquired=True, values=tuple(_decoded(k, raw) for k, raw in zip(keys, reply[2:], strict=True)))

    async def set_json(self, key: str, value: Any, *, ttl_secs: float | None = None) -> None:
        """Store ``value`` as JSON."""
        await self._redis.set(self._key(key), dump_json(key, value), px=None if ttl_secs is None else _ms(ttl_secs))

    async def set_json_fenced(self, key: str, value: Any, *, ttl_secs: float | None = None, lock_key: str,
                              token: str) -> bool:
        """Store ``value`` only while ``token`` holds ``lock_key``, in one script."""
        keys = [self._key(key), self._key(lock_key)]
        return bool(await self._set_fenced(keys=keys, args=[dump_json(key, value), token, _ttl_arg(ttl_secs)]))

    async def delete(self, key: str) -> None:
        """Remove ``key``."""
        await self._redis.delete(self._key(key))

    async def offer_newest(self, key: str, stamp: float, *, ttl_secs: float | None = None) -> bool:
        """Keep the largest stamp atomically."""
        return bool(await self._offer(keys=[self._key(key)], args=[repr(float(stamp)), _ttl_arg(ttl_secs)]))

    async def newest(self, key: str) -> float | None:
        """Return the newest stamp."""
        raw = await self._redis.get(self._key(key))
        return None if raw is None else float(raw)

    async def acquire(self, key: str, token: str, ttl_secs: float) -> bool:
        """Take (or extend our own) lock with ``SET NX PX`` semantics: the locked read of no keys."""
        return (await self.acquire_and_read(key, token, ttl_secs)).acquired

    async def release(self, key: str, token: str) -> bool:
        """Delete the lock only if ``token`` holds it."""
        return bool(await self._release(keys=[self._key(key)], args=[token]))

    async def clear(self) -> int:
        """Delete every key under this store's prefix; return how many were deleted."""
        keys = [key async for key in self._redis.scan_iter(match=self.prefix + "*", count=500)]
        if keys:
            await self._redis.delete(*keys)
        return len(keys)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()
