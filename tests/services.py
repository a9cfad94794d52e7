"""The real services some tests need, found or skipped with the reason.

PostgreSQL (127.0.0.1:5432, database ``test``), Redis (127.0.0.1:6379) and
headless Chromium are used for real where a test claims to test them. On a
machine without them those tests skip with the reason, never silently.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

__all__ = [
    "REDIS_URL",
    "chromium_path",
    "connected_redis",
    "counting_redis",
    "dump_dom",
    "headless_chromium_args",
    "postgres_url",
]

POSTGRES_USERS = ("postgres", "root")
REDIS_URL = "redis://127.0.0.1:6379/0"


async def _probe_postgres() -> tuple[str | None, list[str]]:
    import asyncpg

    errors = []
    for user in POSTGRES_USERS:
        try:
            conn = await asyncpg.connect(host="127.0.0.1", port=5432, user=user, database="test", timeout=3)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            errors.append(f"{user}: {type(exc).__name__}: {exc}")
            continue
        await conn.close()
        return f"postgresql+asyncpg://{user}@127.0.0.1:5432/test", errors
    return None, errors


@functools.cache
def _postgres() -> tuple[str | None, str]:
    # Probed on a thread of its own so it works from sync and async tests alike.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        url, errors = pool.submit(asyncio.run, _probe_postgres()).result()
    return url, "; ".join(errors)


def postgres_url() -> str:
    """The SQLAlchemy URL of the local PostgreSQL test database; skips visibly when it is unreachable."""
    url, errors = _postgres()
    if url is None:
        pytest.skip(f"PostgreSQL not reachable at 127.0.0.1:5432: {errors}")
    return url


def chromium_path() -> str:
    """The headless Chromium binary; skips visibly when it is not installed."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("headless Chromium not installed (Debian package 'chromium'): page not checked in a browser")
    return path


def headless_chromium_args(profile_dir: Path) -> list[str]:
    """Chromium and the flags for a headless run on a machine with no outside network."""
    return [
        chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={profile_dir}",
    ]


def dump_dom(page: Path, profile_dir: Path) -> str:
    """Render a local HTML file in headless Chromium and return the DOM its scripts built."""
    completed = subprocess.run(
        [*headless_chromium_args(profile_dir), "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=90, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


class RoundTrips:
    """How many requests a Redis client sent (a pipeline or a script counts once: one write, one reply)."""

    count = 0


@contextlib.asynccontextmanager
async def counting_redis(prefix: str) -> AsyncIterator:
    """Like :func:`connected_redis`, on a client whose connections count what they send; yields ``(store, trips)``."""
    import redis.asyncio as aioredis
    from redis.asyncio.connection import Connection

    trips = RoundTrips()

    class CountingConnection(Connection):
        async def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
            trips.count += 1
            await super().send_packed_command(command, check_health)

    pool = aioredis.ConnectionPool.from_url(REDIS_URL, decode_responses=True, connection_class=CountingConnection)
    async with connected_redis(prefix, client=aioredis.Redis(connection_pool=pool)) as store:
        yield store, trips


@contextlib.asynccontextmanager
async def connected_redis(prefix: str, *, client: object = None) -> AsyncIterator:
    """A Redis state store under a unique prefix, cleaned up afterwards; skips visibly when Redis is down."""
    from pipecat_harness.state.redis_store import RedisStateStore
    from pipecat_harness.state.store import StoreError

    store = RedisStateStore(REDIS_URL, prefix=prefix, client=client)
    try:
        await store.ping()
    except StoreError as exc:
        await store.close()
        pytest.skip(f"Redis not reachable at 127.0.0.1:6379: {exc}")
    try:
        yield store
    finally:
        await store.clear()
        await store.close()


