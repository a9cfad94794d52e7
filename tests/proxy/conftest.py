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


class ServerThread:
    """Serves an ASGI app with uvicorn on a free loopback port in a background thread."""

    def __init__(self, app) -> None:
        import socket
        import threading

        import uvicorn

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ServerThread":
        import time

        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def serve() -> type[ServerThread]:
    """``with serve(app) as server:`` runs ``app`` on loopback for the block."""
    return ServerThread
