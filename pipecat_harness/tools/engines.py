"""One engine and connection pool per database URL, shared by every ledger of a process.

A gate per call used to build its own engine (a new pool and 20–30 ms of
connection set-up on its first write, one PostgreSQL connection per call).
:func:`acquire_engine` hands every ledger of the running event loop the same
engine for a URL (engines are bound to the loop their connections were made
in) and counts its users; :func:`release_engine` disposes of it when the last
one closes. Tables are created once per engine and prefix.

Beside the engine, each shared engine carries the ledger's hot-path store
(:mod:`pipecat_harness.tools.ledger_store`) on the same database. The
embedded default, in-memory SQLite, becomes a private database file in a
temporary directory, removed with the engine: the store's threads and the
engine's connections must all see one database, which separate connections
to ``:memory:`` never do.

On SQLite, writers are serialised inside the process with one lock per engine
(:attr:`SharedEngine.write_lock`): SQLite allows one writer at a time anyway,
and waiting on an asyncio lock is far cheaper than connections of the same
process contending for the database lock in threads.
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
    """An engine shared by the ledgers of one event loop.

    Parameters:
        engine: The SQLAlchemy async engine.
        store: The hot-path statements on the same database.
        write_lock: Serialises SQLAlchemy write transactions (SQLite only).
        users: Ledgers using it.
        created: Table prefixes whose tables exist.
        private_dir: The temporary directory of a private database, removed on disposal.
    """

    engine: AsyncEngine
    store: LedgerStore
    write_lock: asyncio.Lock | None
    users: int = 0
    created: set[str] = field(default_factory=set)
    private_dir: str | None = None

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (serialised in the process on SQLite)."""
        if self.write_lock is None:
            async with self.engine.begin() as conn:
                yield conn
            return
        async with self.write_lock, self.engine.begin() as conn:
            yield conn


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, SharedEngine]] = weakref.WeakKeyDictionary()


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _new_shared(url: str) -> SharedEngine:
    private_dir = None
    if is_memory_sqlite(url):
        private_dir = tempfile.mkdtemp(prefix="harness-ledger-")
        url = f"sqlite+aiosqlite:///{private_dir}/ledger.db"
    return SharedEngine(make_engine(url), make_store(url), asyncio.Lock() if _is_sqlite(url) else None,
                        private_dir=private_dir)


def shared_engine_for(engine: AsyncEngine) -> SharedEngine:
    """Wrap an engine the caller made (its ledger's store opens its own connections to the same database).

    Raises:
        ValueError: An in-memory SQLite engine (pass the URL instead).
    """
    url = engine.url.render_as_string(hide_password=False)
    return SharedEngine(engine, make_store(url), asyncio.Lock() if engine.dialect.name == "sqlite" else None,
                        users=1)


def acquire_engine(url: str) -> SharedEngine:
    """Return the shared engine for ``url`` (a private one outside a running loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        shared = _new_shared(url)
        shared.users = 1
        return shared
    engines = _BY_LOOP.setdefault(loop, {})
    found = engines.get(url)
    if found is None:
        found = engines[url] = _new_shared(url)
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
