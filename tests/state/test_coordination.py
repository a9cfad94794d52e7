import asyncio

import pytest

from pipecat_harness.state.coordination import CallLock, LockLost, LockTimeout, Superseded, TranscriptDebouncer
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.redis_store import RedisStateStore
from pipecat_harness.state.store import LockedRead, NewestGate, StateStore
from tests.state.worker_processes import spawn_worker, start_together


@pytest.fixture
def store(any_store: StateStore) -> StateStore:
    return any_store


def test_lock_times_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        CallLock(MemoryStateStore(), ttl_secs=0)


async def test_work_outliving_the_lease_keeps_the_lock_and_loses_no_update(store: StateStore):
    # 3 read-modify-write updates, each lasting 3 lease lengths: renewal keeps them serial
    lock = CallLock(store, ttl_secs=0.1, work_timeout_secs=2, poll_secs=0.005)

    async def update() -> None:
        async def work() -> None:
            value = (await store.get_json("counter")) or 0
            await asyncio.sleep(0.3)
            await lock.write("counter", value + 1)

        await lock.run("call", work)

    await asyncio.gather(update(), update(), update())
    assert await store.get_json("counter") == 3


async def test_a_write_after_losing_the_lock_is_refused_and_changes_nothing(store: StateStore):
    lock = CallLock(store, ttl_secs=0.1, work_timeout_secs=2)

    async def stalled_holder() -> None:
        await store.set_json("state", "newer")
        # the lease passes to another worker (as if this process had stalled past its TTL)
        await store.release("lock:call", _current_token(store))
        assert await store.acquire("lock:call", "other-worker", 5)
        await lock.write("state", "stale")

    with pytest.raises(LockLost):
        await lock.run("call", stalled_holder)
    assert await store.get_json("state") == "newer"


def _current_token(store: StateStore) -> str:
    from pipecat_harness.state.coordination import _HELD

    held = _HELD.get()
    assert held is not None
    return held[2]


async def test_a_dead_workers_lock_delays_the_next_turn_by_at_most_its_lease(store: StateStore):
    await store.acquire("lock:call", "killed-worker", 1.0)  # held by a process that will never release it
    lock = CallLock(store, ttl_secs=1.0, work_timeout_secs=1, poll_secs=0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await lock.run("call", lambda: asyncio.sleep(0, result="ran")) == "ran"
    assert loop.time() - started <= 1.2


async def test_lock_serialises_concurrent_work(store: StateStore):
    lock = CallLock(store, ttl_secs=2, work_timeout_secs=1, poll_secs=0.001)
    inside = 0
    overlaps = 0
    counter = 0

    async def work() -> None:
        nonlocal inside, overlaps, counter
        inside += 1
        overlaps += inside > 1
        value = counter
        await asyncio.sleep(0.002)
        counter = value + 1
        inside -= 1

    await asyncio.gather(*(lock.run("call", work) for _ in range(20)))
    assert (counter, overlaps) == (20, 0)


async def test_lock_is_released_when_the_work_fails(store: StateStore):
    lock = CallLock(store, ttl_secs=2, work_timeout_secs=1)

    async def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await lock.run("call", boom)
    assert await store.acquire("lock:call", "someone", 1)


async def test_work_longer_than_its_timeout_is_cut_and_the_lock_freed(store: StateStore):
    lock = CallLock(store, ttl_secs=0.5, work_timeout_secs=0.05)
    with pytest.raises(TimeoutError):
        await lock.run("call", lambda: asyncio.sleep(1))
    assert await store.acquire("lock:call", "next", 1)


async def test_busy_lock_times_out_clearly(store: StateStore):
    await store.acquire("lock:call", "other-worker", 5)
    lock = CallLock(store, ttl_secs=2, work_timeout_secs=1, acquire_timeout_secs=0.05)
    with pytest.raises(LockTimeout, match="busy"):
        await lock.run("call", lambda: asyncio.sleep(0))


async def test_debounce_newest_wins_and_superseded_partials_bail(store: StateStore):
    debouncer = TranscriptDebouncer(store, delay_secs=0.05)
    calls: list[float] = []

    async def utterance(stamp: float, arrives_after: float) -> None:
        await asyncio.sleep(arrives_after)
        if await debouncer.settle("call", stamp):
            calls.append(stamp)

    await asyncio.gather(utterance(1.0, 0), utterance(2.0, 0.01), utterance(3.0, 0.02))
    assert calls == [3.0]
    # a late, older partial never wins
    assert not await debouncer.settle("call", 2.5)
    assert calls == [3.0]


async def test_debounce_without_competition_passes(store: StateStore):
    debouncer = TranscriptDebouncer(store, delay_secs=0)
    assert await debouncer.settle("call-a", 1.0)
    assert await debouncer.settle("call-b", 0.5)  # calls are independent


class StepwiseStore(MemoryStateStore):
    """A store with only the single operations: the interface's own combined read is used."""

    async def acquire_and_read(self, lock_key, token, ttl_secs, keys=(), *, gate=None):
        return await StateStore.acquire_and_read(self, lock_key, token, ttl_secs, keys, gate=gate)


@pytest.fixture(params=["own", "stepwise"])
def reading_store(request: pytest.FixtureRequest, store: StateStore) -> StateStore:
    return StepwiseStore() if request.param == "stepwise" else store


async def test_acquire_and_read_takes_the_lock_and_reads_in_order(reading_store: StateStore):
    await reading_store.set_json("a", {"x": 1})
    claim = await reading_store.acquire_and_read("lock:c", "t1", 5, ["a", "missing"])
    assert claim == LockedRead(acquired=True, values=({"x": 1}, None))
    assert await reading_store.acquire_and_read("lock:c", "t2", 5, ["a"]) == LockedRead(acquired=False)
    assert (await reading_store.acquire_and_read("lock:c", "t1", 5, ["a"])).acquired  # the holder may extend


async def test_acquire_and_read_offers_the_stamp_and_yields_to_a_newer_one(reading_store: StateStore):
    claim = await reading_store.acquire_and_read("lock:c", "t1", 5, [], gate=NewestGate("d", 2.0, offer=True))
    assert claim.acquired and await reading_store.newest("d") == 2.0
    await reading_store.release("lock:c", "t1")
    for offer in (True, False):
        older = await reading_store.acquire_and_read("lock:c", "t2", 5, ["a"], gate=NewestGate("d", 1.0, offer=offer))
        assert older == LockedRead(acquired=False, superseded=True)
    assert await reading_store.acquire("lock:c", "t3", 5)  # a superseded request holds nothing
    assert await reading_store.newest("d") == 2.0


async def test_run_reading_hands_the_values_to_the_work_under_the_lock(store: StateStore):
    lock = CallLock(store, ttl_secs=2, work_timeout_secs=1)
    await store.set_json("state", {"version": 4})

    async def work(values):
        assert not await store.acquire("lock:call", "someone-else", 1)  # held while the work runs
        return values

    assert await lock.run_reading("call", ["state", "absent"], work) == ({"version": 4}, None)
    assert await store.acquire("lock:call", "next", 1)


async def test_a_turn_waiting_for_the_lock_gives_way_to_a_newer_one(store: StateStore):
    lock = CallLock(store, ttl_secs=2, work_timeout_secs=1, poll_secs=0.005)
    debouncer = TranscriptDebouncer(store, delay_secs=0)
    await store.acquire("lock:call", "earlier-turn", 2)
    ran: list[float] = []

    async def turn(stamp: float):
        async def work(values):
            ran.append(stamp)

        await lock.run_reading("call", [], work, gate=debouncer.gate("call", stamp, offer=True))

    waiting = asyncio.create_task(turn(1.0))
    await asyncio.sleep(0.03)
    assert await store.newest("debounce:call") == 1.0  # offered although the lock was busy
    assert await debouncer.offer("call", 2.0)  # a newer utterance arrives meanwhile
    with pytest.raises(Superseded):
        await waiting
    await store.release("lock:call", "earlier-turn")
    await turn(2.0)
    assert ran == [2.0]


@pytest.mark.redis
async def test_lock_across_worker_processes(redis_store: RedisStateStore):
    processes = [spawn_worker("lock", redis_store.prefix, 0.0, "8") for _ in range(4)]
    await start_together(redis_store, processes)
    redis = redis_store._redis
    assert int(await redis.get(redis_store.prefix + "counter")) == 32
    assert await redis.get(redis_store.prefix + "overlaps") is None


@pytest.mark.redis
async def test_debounce_across_worker_processes(redis_store: RedisStateStore):
    # offers 20 ms apart inside a 1 s debounce window: only the newest may reach the model
    processes = [spawn_worker("debounce", redis_store.prefix, i * 0.02, f"{100 + i}.0") for i in range(4)]
    await start_together(redis_store, processes)
    redis = redis_store._redis
    assert int(await redis.get(redis_store.prefix + "model_calls")) == 1
    assert float(await redis.get(redis_store.prefix + "winner")) == 103.0
