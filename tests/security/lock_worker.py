"""A worker process for the lock attacks: takes a call's lock and holds or updates under it.

Usage: python lock_worker.py MODE PREFIX CALL_ID
  hold    take the lock, report "holding", then work forever (the test SIGKILLs it)
  update  add one fact to the call's state with work that lasts three lock leases
"""

import asyncio
import os
import sys

from pipecat_harness.state.call_state import CallStateStore, Provenance
from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.redis_store import RedisStateStore


async def main() -> None:
    mode, prefix, call_id = sys.argv[1:4]
    store = RedisStateStore("redis://127.0.0.1:6379/0", prefix=prefix)
    redis = store._redis
    if mode == "hold":
        lock = CallLock(store, work_timeout_secs=3600)  # the default one-second lease, renewed while alive

        async def forever() -> None:
            await redis.set(prefix + "holding", str(os.getpid()))
            await asyncio.sleep(3600)

        await lock.run(call_id, forever)
    elif mode == "update":
        lock = CallLock(store, ttl_secs=0.3, work_timeout_secs=30, acquire_timeout_secs=30, poll_secs=0.005)
        states = CallStateStore(store, lock=lock)
        await redis.incr(prefix + "ready")
        while not await redis.get(prefix + "go"):
            await asyncio.sleep(0.005)

        async def slow_change(state) -> None:
            await asyncio.sleep(1.0)  # three leases of 0.3 s: only renewal keeps the lock
            state.set_fact(f"from-{os.getpid()}", True, Provenance("system"))

        await states.update(call_id, slow_change)
    await store.close()


asyncio.run(main())
