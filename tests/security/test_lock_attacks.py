"""Locks under attack by time: a killed holder and work that outlives the lease, across real processes on Redis."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.state.call_state import CallStateStore
from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.redis_store import RedisStateStore
from tests.security.servers import ROOT

pytestmark = pytest.mark.redis

WORKER = Path(__file__).with_name("lock_worker.py")


def _spawn(mode: str, prefix: str, call_id: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, prefix, call_id], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


async def _wait_for(redis, key: str, count: int = 1, processes: list[subprocess.Popen] = ()) -> None:
    deadline = time.monotonic() + 60
    while int(await redis.get(key) or 0) < count if key.endswith("ready") else not await redis.get(key):
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), "worker did not start"
        await asyncio.sleep(0.01)


async def test_a_sigkilled_holder_delays_the_next_turn_by_at_most_a_second(redis_store: RedisStateStore):
    holder = _spawn("hold", redis_store.prefix, "call-1")
    await _wait_for(redis_store._redis, redis_store.prefix + "holding", processes=[holder])
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    driver = ChecklistDriver(bundled_checklist(), redis_store, lock=CallLock(redis_store))
    started = time.monotonic()
    directive = await driver.sync("call-1", ["Hi."])
    waited = time.monotonic() - started
    print(f"next turn after a SIGKILLed lock holder: {waited * 1000:.0f} ms")
    assert directive is not None and "safety incidents" in directive.wording
    assert waited <= 1.1  # the holder's one-second lease, plus the turn's own work


async def test_work_outliving_the_lease_in_three_processes_loses_no_update(redis_store: RedisStateStore):
    workers = [_spawn("update", redis_store.prefix, "call-2") for _ in range(3)]
    redis = redis_store._redis
    await _wait_for(redis, redis_store.prefix + "ready", 3, workers)
    await redis.set(redis_store.prefix + "go", "1")
    for worker in workers:
        _, err = await asyncio.to_thread(worker.communicate, timeout=60)
        assert worker.returncode == 0, err.decode()[-2000:]
    state = await CallStateStore(redis_store).load("call-2")
    assert (len(state.working), state.version) == (3, 3)
