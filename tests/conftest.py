"""Shared test setup: quiet Pipecat logs; Redis-backed state stores for the tests that use them."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator

import pytest
from loguru import logger

from tests.services import connected_redis

logger.remove()
logger.add(sys.stderr, level="WARNING")


@pytest.fixture
def redis_prefix() -> str:
    return f"pipecat-harness-test-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
async def redis_store(redis_prefix: str) -> AsyncIterator:
    async with connected_redis(redis_prefix) as store:
        yield store


@pytest.fixture(params=["memory", "redis"])
async def any_store(request: pytest.FixtureRequest, redis_prefix: str) -> AsyncIterator:
    """Each test using it runs on the in-process store and on Redis."""
    from pipecat_harness.state.memory import MemoryStateStore

    if request.param == "memory":
        yield MemoryStateStore()
        return
    async with connected_redis(redis_prefix) as store:
        yield store
