"""One raw ``sqlite3`` connection served by a dedicated thread.

Measured on the ledger's write lifecycle, ``aiosqlite`` behind SQLAlchemy
paid one thread hop per statement and per ``BEGIN``/``COMMIT`` (about nine
per write) plus SQLAlchemy's statement compilation; the write ran at a few
hundred operations per second where plain ``sqlite3`` did thousands.
:class:`SqliteThread` runs a whole unit of work (every statement of one
transaction) in one hop: the event loop hands it a function, the thread runs
it inside ``BEGIN IMMEDIATE … COMMIT`` and resolves the caller's future.
The loop never blocks on the database.

Units queued while one runs are taken together and their futures resolved
in one wake-up of the loop, so throughput grows with concurrency instead of
paying a wake-up per unit.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["SqliteThread"]

T = TypeVar("T")

_Unit = tuple["asyncio.Future[Any]", Callable[[sqlite3.Connection], Any], bool]


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled; the unit ran (or not) all the same
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _resolve_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        _resolve(future, result, error)


class SqliteThread:
    """A thread owning one ``sqlite3`` connection (WAL, ``synchronous=NORMAL``).

    Args:
        path: The database file.
        busy_timeout_secs: How long a write waits for another process's write lock.
        name: What the database is, for the thread's name and error messages.
    """

    def __init__(self, path: str, *, busy_timeout_secs: float = 30.0, name: str = "ledger") -> None:
        self.path = path
        self.name = name
        self._busy_timeout_secs = busy_timeout_secs
        self._queue: queue.SimpleQueue[_Unit | None] = queue.SimpleQueue()
        self._open_error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name=f"{name}-sqlite", daemon=True)
        self._thread.start()
        self._closed = False

    def _connect(self) -> sqlite3.Connection | None:
        """Open the connection, or record why not (the next unit tries again)."""
        # Switching a new file to WAL takes an exclusive lock and does not wait for another
        # connection's lock the way statements do (it fails "database is locked" at once):
        # retried briefly, and the connection is opened when first needed, not at start.
        for attempt in range(50):
            conn = None
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._busy_timeout_secs)
                # WAL with synchronous=NORMAL keeps every commit durable against process crashes
                # (the ledger's concern) without an fsync per transaction; readers never block writers.
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                self._open_error = None
                return conn
            except sqlite3.Error as exc:
                self._open_error = exc
                if conn is not None:
                    conn.close()
                if "locked" not in str(exc) and "busy" not in str(exc):
                    return None
                time.sleep(min(0.002 * 2**attempt, 0.1))
        return None

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                item = self._queue.get()
                batch: list[_Unit | None] = [item]
                with contextlib.suppress(queue.Empty):
                    while len(batch) < 64:
                        batch.append(self._queue.get_nowait())
                outcomes: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, Any]]] = {}
                stop = False
                for unit in batch:
                    if unit is None:
                        stop = True
                        continue
                    future, work, transaction = unit
                    if conn is None:
                        conn = self._connect()
                    result, error = self._run(conn, work, transaction)
                    outcomes.setdefault(future.get_loop(), []).append((future, result, error))
                for loop, done in outcomes.items():
                    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                        loop.call_soon_threadsafe(_resolve_all, done)
                if stop:
                    return
        finally:
            if conn is not None:
                conn.close()

    def _run(self, conn: sqlite3.Connection | None, work: Callable[[sqlite3.Connection], Any],
             transaction: bool) -> tuple[Any, BaseException | None]:
        if conn is None:
            return None, sqlite3.OperationalError(
                f"cannot open the SQLite {self.name} {self.path!r}: {self._open_error}")
        try:
            if not transaction:
                return work(conn), None
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result, None
        except BaseException as exc:
            return None, exc

    async def run(self, work: Callable[[sqlite3.Connection], T], *, transaction: bool = True) -> T:
        """Run ``work(connection)`` in the thread (in one transaction unless ``transaction=False``).

        Raises:
            RuntimeError: The thread was closed.
            sqlite3.Error: Whatever the database raised; a transaction is rolled back.
        """
        if self._closed:
            raise RuntimeError(f"the SQLite {self.name} {self.path!r} is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((future, work, transaction))
        return await future

    async def close(self) -> None:
        """Finish the queued units, close the connection and end the thread."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
