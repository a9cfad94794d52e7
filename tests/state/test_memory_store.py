import pytest

from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.store import StoreError


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_values_are_copied_on_write_and_read():
    store = MemoryStateStore()
    value = {"items": [1, 2]}
    await store.set_json("k", value)
    value["items"].append(3)
    read = await store.get_json("k")
    assert read == {"items": [1, 2]}
    read["items"].append(9)
    assert await store.get_json("k") == {"items": [1, 2]}


async def test_unserialisable_value_is_refused_and_old_value_kept():
    store = MemoryStateStore()
    await store.set_json("k", {"a": 1})
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        await store.set_json("k", {"a": object()})
    assert await store.get_json("k") == {"a": 1}


async def test_expiry_follows_the_clock():
    clock = FakeClock()
    store = MemoryStateStore(clock=clock)
    await store.set_json("k", 1, ttl_secs=5)
    clock.now += 4.9
    assert await store.get_json("k") == 1
    clock.now += 0.2
    assert await store.get_json("k") is None


async def test_offer_newest_keeps_the_largest_stamp():
    store = MemoryStateStore()
    assert await store.offer_newest("d", 2.0)
    assert not await store.offer_newest("d", 1.0)
    assert await store.offer_newest("d", 2.0)
    assert await store.offer_newest("d", 3.5)
    assert await store.newest("d") == 3.5


async def test_lock_is_exclusive_expires_and_releases_only_for_its_holder():
    clock = FakeClock()
    store = MemoryStateStore(clock=clock)
    assert await store.acquire("l", "a", 10)
    assert not await store.acquire("l", "b", 10)
    assert not await store.release("l", "b")
    clock.now += 10.1
    assert await store.acquire("l", "b", 10)
    assert not await store.release("l", "a")
    assert await store.release("l", "b")
    assert await store.acquire("l", "a", 10)


async def test_keys_are_capped_least_recently_used_first():
    store = MemoryStateStore(max_keys=3)
    for name in ("a", "b", "c"):
        await store.set_json(name, name)
    assert await store.get_json("a") == "a"  # touched: now the most recent
    await store.set_json("d", "d")
    assert [await store.get_json(k) for k in ("a", "b", "c", "d")] == ["a", None, "c", "d"]
    assert (store.key_count, store.evicted) == (3, 1)


async def test_idle_call_state_expires_even_if_never_read_again():
    now = [0.0]
    store = MemoryStateStore(clock=lambda: now[0], default_ttl_secs=60)
    for index in range(2_000):
        await store.set_json(f"checklist:site:call-{index}", {"turns": index})
    now[0] = 61.0
    await store.set_json("checklist:site:live-call", {"turns": 1})
    for index in range(1_100):  # writes sweep expired keys as they go
        await store.set_json("checklist:site:live-call", {"turns": index})
    assert store.key_count == 1


async def test_memory_for_idle_calls_is_capped():
    import tracemalloc

    from pipecat_harness.checklist.driver import ChecklistDriver
    from pipecat_harness.checklist.model import bundled_checklist

    store = MemoryStateStore(max_keys=100)
    driver = ChecklistDriver(bundled_checklist(), store)
    await driver.sync("warm-up", ["Hi."])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(150):  # three times the calls the cap holds
            await driver.sync(f"idle-{index}", ["Hi.", "No incidents and no near misses."])
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert store.key_count <= 100
    assert grown < 50 * 10_000  # about 5 KB per kept call (two keys); the evicted calls hold nothing
