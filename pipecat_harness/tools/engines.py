"""One engine, pool and hot-path store per database URL and event loop, shared by the ledgers and counted.

In-memory SQLite becomes a private temporary file (threads and connections must see one database); SQLite writers
are serialised in the process by one lock, cheaper than connections contending for the database lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pipecat_harness.tools.ledger_store import LedgerStore, is_memory_sqlite, make_store
from pipecat_harness.tools.storage import make_engine

__all__ = ["SharedEngine", "acquire_engine", "is_memory_sqlite", "release_engine", "shared_engine_for"]


@dataclass
class SharedEngine:
    """An engine shared by the ledgers of one event loop, with the tables (``created``) known to exist."""

    engine: AsyncEngine
    store: LedgerStore
    write_lock: asyncio.Lock | None
    users: int = 0
    created: set[str] = field(default_factory=set)
    private_dir: str | None = None

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (serialised in the process on SQLite)."""
        async with self.write_lock or contextlib.nullcontext(), self.engine.begin() as conn:
            yield conn


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, SharedEngine]] = weakref.WeakKeyDictionary()


def _new_shared(url: str, users: int = 0) -> SharedEngine:
    private_dir = None
    if is_memory_sqlite(url):
        private_dir = tempfile.mkdtemp(prefix="harness-ledger-")
        url = f"sqlite+aiosqlite:///{private_dir}/ledger.db"
    lock = asyncio.Lock() if url.startswith("sqlite") else None
    return SharedEngine(make_engine(url), make_store(url), lock, users, private_dir=private_dir)


def shared_engine_for(engine: AsyncEngine) -> SharedEngine:
    """Wrap an engine the caller made; ``ValueError`` for in-memory SQLite (pass the URL instead).

    Its ledger's store opens its own connections to the same database.
    """
    lock = asyncio.Lock() if engine.dialect.name == "sqlite" else None
    return SharedEngine(engine, make_store(engine.url.render_as_string(hide_password=False)), lock, users=1)


def acquire_engine(url: str) -> SharedEngine:
    """Return the shared engine for ``url`` (a private one outside a running loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return _new_shared(url, 1)
    engines = _BY_LOOP.setdefault(loop, {})
    found = engines.get(url) or engines.setdefault(url, _new_shared(url))
    found.users += 1
    return found


async def release_engine(url: str, shared: SharedEngine) -> None:
    """Drop one user; dispose of the engine when it was the last."""
    shared.users -= 1
    if shared.users > 0:
        return
    for engines in list(_BY_LOOP.values()):
        if engines.get(url) is shared:
            del engines[url]
    await shared.store.close()
    await shared.engine.dispose()
    if shared.private_dir is not None:
        shutil.rmtree(shared.private_dir, ignore_errors=True)
