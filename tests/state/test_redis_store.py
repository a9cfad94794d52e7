import asyncio

import pytest

from pipecat_harness.state.coordination import CallLock, TranscriptDebouncer
from pipecat_harness.state.redis_store import RedisStateStore
from pipecat_harness.state.store import LockedRead, NewestGate, StoreError
from tests.services import counting_redis

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


async def test_taking_the_lock_and_reading_the_state_is_one_round_trip(redis_prefix: str):
    async with counting_redis(redis_prefix) as (store, trips):
        await store.set_json("state", {"version": 3})
        await store.acquire_and_read("lock", "warm", 5, ["state"])  # the first use loads the script
        await store.release("lock", "warm")
        before = trips.count
        claim = await store.acquire_and_read(
            "lock", "a", 5, ["state", "absent"], gate=NewestGate("stamp", 2.0, offer=True, ttl_secs=60)
        )
        assert trips.count - before == 1
        assert claim == LockedRead(acquired=True, values=({"version": 3}, None))
        assert await store.newest("stamp") == 2.0  # offered in the same operation
        assert not await store.acquire("lock", "b", 5)  # and the lock is held


async def test_the_work_under_the_lock_starts_after_one_round_trip(redis_prefix: str):
    async with counting_redis(redis_prefix) as (store, trips):
        lock = CallLock(store)
        await store.set_json("state", "stored")
        await lock.run("warm", _nothing)
        before = trips.count
        seen = []

        async def work(values):
            seen.append((trips.count - before, values))

        await lock.run_reading("call", ["state"], work, gate=TranscriptDebouncer(store).gate("call", 1.0, offer=True))
        assert seen == [(1, ("stored",))]


async def _nothing() -> None:
    return None


async def test_a_newer_stamp_refuses_the_lock_in_the_same_round_trip(redis_store: RedisStateStore):
    await redis_store.offer_newest("stamp", 5.0)
    claim = await redis_store.acquire_and_read("lock", "a", 5, ["state"], gate=NewestGate("stamp", 4.0, offer=True))
    assert claim == LockedRead(acquired=False, superseded=True)
    assert await redis_store.newest("stamp") == 5.0
    assert await redis_store.acquire("lock", "b", 5)  # the superseded request took nothing


async def test_a_corrupt_value_read_with_the_lock_is_a_clear_error(redis_store: RedisStateStore):
    await redis_store._redis.set(redis_store.prefix + "bad", "{not json")
    with pytest.raises(StoreError, match="not JSON"):
        await redis_store.acquire_and_read("lock", "a", 5, ["bad"])
