import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.redis_store import RedisStateStore
from pipecat_harness.state.store import StateStore, StoreError

REDIS_URL = "redis://127.0.0.1:6379/0"


@contextlib.asynccontextmanager
async def connected_redis(prefix: str) -> AsyncIterator[RedisStateStore]:
    """A Redis store under a unique prefix, cleaned up afterwards; skips visibly when Redis is down."""
    store = RedisStateStore(REDIS_URL, prefix=prefix)
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


@pytest.fixture
def redis_prefix() -> str:
    return f"pipecat-harness-test-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
async def redis_store(redis_prefix: str) -> AsyncIterator[RedisStateStore]:
    async with connected_redis(redis_prefix) as store:
        yield store


@pytest.fixture(params=["memory", "redis"])
async def any_store(request, redis_prefix: str) -> AsyncIterator[StateStore]:
    """Each test using it runs on the in-process store and on Redis."""
    if request.param == "memory":
        yield MemoryStateStore()
        return
    async with connected_redis(redis_prefix) as store:
        yield store
