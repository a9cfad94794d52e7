import asyncio

import pytest

from pipecat_harness.state.redis_store import RedisStateStore
from pipecat_harness.state.store import StoreError

pytestmark = pytest.mark.redis


async def test_json_roundtrip_and_delete(redis_store: RedisStateStore):
    await redis_store.set_json("k", {"a": [1, "x"], "b": None})
    assert await redis_store.get_json("k") == {"a": [1, "x"], "b": None}
    await redis_store.delete("k")
    assert await redis_store.get_json("k") is None


async def test_expiry(redis_store: RedisStateStore):
    await redis_store.set_json("k", 1, ttl_secs=0.05)
    await asyncio.sleep(0.15)
    assert await redis_store.get_json("k") is None


async def test_corrupt_value_is_a_clear_error(redis_store: RedisStateStore):
    await redis_store._redis.set(redis_store.prefix + "bad", "{not json")
    with pytest.raises(StoreError, match="not JSON"):
        await redis_store.get_json("bad")


async def test_offer_newest_is_atomic_and_monotonic(redis_store: RedisStateStore):
    assert await redis_store.offer_newest("d", 10.25)
    assert not await redis_store.offer_newest("d", 10.0)
    results = await asyncio.gather(*(redis_store.offer_newest("d2", float(i)) for i in range(50)))
    assert results[-1] is True
    assert await redis_store.newest("d2") == 49.0


async def test_lock_exclusive_and_owner_release(redis_store: RedisStateStore):
    assert await redis_store.acquire("l", "a", 5)
    assert await redis_store.acquire("l", "a", 5)  # the holder may extend
    assert not await redis_store.acquire("l", "b", 5)
    assert not await redis_store.release("l", "b")
    assert await redis_store.release("l", "a")
    assert await redis_store.acquire("l", "b", 0.05)
    await asyncio.sleep(0.15)
    assert await redis_store.acquire("l", "c", 5)


async def test_unreachable_server_is_reported():
    store = RedisStateStore("redis://127.0.0.1:1/0", prefix="x:")
    with pytest.raises(StoreError, match="not reachable"):
        await store.ping()
    await store.close()
