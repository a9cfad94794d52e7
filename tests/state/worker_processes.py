"""Worker processes for the multi-process Redis tests, started together on a signal."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from pipecat_harness.state.redis_store import RedisStateStore

__all__ = ["spawn_worker", "start_together"]

WORKER = Path(__file__).with_name("redis_worker.py")


def spawn_worker(mode: str, prefix: str, delay: float, arg: str, call_id: str = "call-1") -> subprocess.Popen:
    """Start ``redis_worker.py``; it waits for :func:`start_together` before acting."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, prefix, call_id, repr(delay), arg],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def start_together(store: RedisStateStore, processes: list[subprocess.Popen]) -> None:
    """Let the workers go once every one of them has started (however slow the machine)."""
    redis = store._redis
    deadline = time.monotonic() + 60
    while int(await redis.get(store.prefix + "ready") or 0) < len(processes):
        if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in processes):
            raise AssertionError("worker processes did not start")
        await asyncio.sleep(0.02)
    await redis.set(store.prefix + "go", "1")
    await asyncio.to_thread(_wait, processes)


def _wait(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()
