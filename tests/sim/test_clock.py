import asyncio
import time

import pytest

from pipecat_harness.sim.clock import SIMULATION_EPOCH, LoopClock, VirtualTimeGuardError, virtual_time


def run(coro_fn, **kwargs):
    with virtual_time(**kwargs) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(coro_fn())


def test_sleep_takes_virtual_not_wall_time():
    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600 - 1)
        return loop.time()

    started = time.perf_counter()
    assert run(main, max_virtual_secs=4000) == pytest.approx(3599)
    assert time.perf_counter() - started < 5


def test_timers_fire_in_order_with_relative_timing():
    order = []

    async def tick(name, delay):
        await asyncio.sleep(delay)
        order.append((name, asyncio.get_running_loop().time()))

    async def main():
        await asyncio.gather(tick("b", 2.5), tick("a", 0.7), tick("c", 10.0))

    run(main)
    assert [name for name, _ in order] == ["a", "b", "c"]
    assert [round(t, 6) for _, t in order] == [0.7, 2.5, 10.0]


def test_wall_clock_and_pipeline_clock_follow_the_loop():
    async def main():
        clock = LoopClock()
        clock.start()
        wall0 = time.time()
        await asyncio.sleep(42)
        return clock.get_time(), time.time() - wall0

    pipeline_ns, wall_delta = run(main)
    assert pipeline_ns == pytest.approx(42e9)
    assert wall_delta == pytest.approx(42, abs=0.01)


def test_wall_clock_starts_at_the_simulation_epoch():
    async def main():
        return time.time()

    assert run(main) == pytest.approx(SIMULATION_EPOCH.timestamp(), abs=1)


def test_executor_work_freezes_virtual_time():
    def blocking():
        time.sleep(0.05)
        return "done"

    async def main():
        loop = asyncio.get_running_loop()
        before = loop.time()
        result = await loop.run_in_executor(None, blocking)
        return result, loop.time() - before

    result, elapsed = run(main)
    assert result == "done"
    assert elapsed == 0


def test_virtual_budget_guard_stops_a_runaway_call():
    async def main():
        await asyncio.sleep(10_000)

    with pytest.raises(VirtualTimeGuardError, match="virtual time"):
        run(main, max_virtual_secs=100)


def test_time_is_restored_after_the_simulation():
    run(lambda: asyncio.sleep(1000))
    assert abs(time.time() - SIMULATION_EPOCH.timestamp()) > 3600


@pytest.mark.redis
def test_virtual_time_stands_still_while_redis_answers():
    """A store's plain ``await`` on Redis is not cut short by a virtual timer that would fire meanwhile."""
    import uuid

    import redis

    from pipecat_harness.state.redis_store import RedisStateStore

    try:
        redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable at 127.0.0.1:6379: {exc}")

    async def main():
        loop = asyncio.get_running_loop()
        store = RedisStateStore(prefix=f"clock-test-{uuid.uuid4().hex[:8]}:")
        try:
            started = loop.time()
            async with asyncio.timeout(0.001):
                for value in range(20):
                    await store.set_json("k", value)
                    assert await store.get_json("k") == value
            return loop.time() - started
        finally:
            await store.clear()
            await store.close()

    assert run(main) == 0.0
