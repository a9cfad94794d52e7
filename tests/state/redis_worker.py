"""A separate worker process for the multi-process Redis tests.

Usage: python redis_worker.py MODE PREFIX CALL_ID DELAY [ARG]
Every process reports ready, waits for the test's "go" key, then sleeps DELAY
seconds, so they contend at once however long each took to start.
"""

import asyncio
import sys

from pipecat_harness.checklist.analysis import Analysis
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer
from pipecat_harness.state.coordination import CallLock, TranscriptDebouncer
from pipecat_harness.state.redis_store import RedisStateStore

TURNS = [
    "No incidents and no near misses.",
    "No scheduling conflicts, but a compliance update came in.",
    "The permit rules change in March.",
]


class CountingAnalyzer(RuleAnalyzer):
    def __init__(self, store: RedisStateStore) -> None:
        self.store = store

    async def analyze(self, checklist, state, utterance) -> Analysis:
        await self.store._redis.incr(self.store.prefix + "analyzer_calls")
        await asyncio.sleep(0.02)
        return await super().analyze(checklist, state, utterance)


async def main() -> None:
    mode, prefix, call_id, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    store = RedisStateStore("redis://127.0.0.1:6379/0", prefix=prefix)
    redis = store._redis
    await redis.incr(prefix + "ready")
    while not await redis.get(prefix + "go"):
        await asyncio.sleep(0.005)
    await asyncio.sleep(delay)
    if mode == "lock":
        lock = CallLock(store, ttl_secs=2.0, work_timeout_secs=1.0, acquire_timeout_secs=20.0, poll_secs=0.002)

        async def work() -> None:
            inside = await redis.incr(prefix + "inside")
            if inside > 1:
                await redis.incr(prefix + "overlaps")
            value = int(await redis.get(prefix + "counter") or 0)
            await asyncio.sleep(0.003)
            await redis.set(prefix + "counter", value + 1)
            await redis.decr(prefix + "inside")

        for _ in range(int(sys.argv[5])):
            await lock.run(call_id, work)
    elif mode == "debounce":
        stamp = float(sys.argv[5])
        debouncer = TranscriptDebouncer(store, delay_secs=1.0)
        if await debouncer.settle(call_id, stamp):
            await redis.incr(prefix + "model_calls")
            await redis.set(prefix + "winner", repr(stamp))
    elif mode == "driver":
        driver = ChecklistDriver(bundled_checklist(), store, analyzer=CountingAnalyzer(store))
        count = int(sys.argv[5])
        await driver.sync(call_id, TURNS[:count], stamp=float(count))
    await store.close()


asyncio.run(main())
