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

WAL checkpoints (copying committed pages into the database file, with an
``fsync`` of each file under ``synchronous=NORMAL``) ran on the writer,
inside the commit that crossed SQLite's 1,000-page threshold: about one
transaction in 150 of the ledger's paid them, and they were more than half
of the writer's time on a busy disk. A writer made with ``checkpoints=True``
hands them to a thread of their own instead, every :data:`CHECKPOINT_EVERY`
commits (as often as before for the ledger's transactions of six or seven
pages, so the WAL is synced as often as before). These checkpoints are
passive: they never wait for or block the writer. Under continuous writes
they cannot let the WAL start over (that needs every frame copied back
before the next write), so once it holds :data:`WAL_LIMIT` frames the writer
checkpoints itself, between units, after answering the unit that ran.
Commits, their durability and the journal settings are unchanged.
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

__all__ = ["CHECKPOINT_EVERY", "WAL_LIMIT", "SqliteThread"]

T = TypeVar("T")

#: Commits between two background checkpoints of a writer with ``checkpoints=True``.
CHECKPOINT_EVERY = 128
#: WAL frames past which such a writer checkpoints itself (so the WAL can start over).
WAL_LIMIT = 4000

_Unit = tuple["asyncio.Future[Any] | None", Callable[[sqlite3.Connection], Any], bool]


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled; the unit ran (or not) all the same
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _passive_checkpoint(conn: sqlite3.Connection) -> int:
    """Copy committed WAL frames back to the database file without waiting for anyone; the WAL's length."""
    try:
        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error:  # another connection is checkpointing
        return 0
    return int(row[1]) if row is not None else 0


def _resolve_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        _resolve(future, result, error)


class SqliteThread:
    """A thread owning one ``sqlite3`` connection (WAL, ``synchronous=NORMAL``).

    Args:
        path: The database file.
        busy_timeout_secs: How long a write waits for another process's write lock.
        name: What the database is, for the thread's name and error messages.
        checkpoints: Run the WAL checkpoints on a thread of their own (see the module).
    """

    def __init__(self, path: str, *, busy_timeout_secs: float = 30.0, name: str = "ledger",
                 checkpoints: bool = False) -> None:
        self.path = path
        self.name = name
        self._busy_timeout_secs = busy_timeout_secs
        self._queue: queue.SimpleQueue[_Unit | None] = queue.SimpleQueue()
        self._open_error: BaseException | None = None
        self._checkpointer = SqliteThread(path, name=f"{name}-checkpoints") if checkpoints else None
        self._commits = 0
        self._checkpointing = False  # a background checkpoint is queued or running
        self._wal_frames = 0  # the WAL's frames as the last checkpoint found them
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
                if self._checkpointer is not None:
                    conn.execute("PRAGMA wal_autocheckpoint=0")
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
                    if future is not None:
                        outcomes.setdefault(future.get_loop(), []).append((future, result, error))
                    if transaction and error is None:
                        self._commits += 1
                for loop, done in outcomes.items():
                    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                        loop.call_soon_threadsafe(_resolve_all, done)
                if stop:
                    return
                if conn is not None and self._checkpointer is not None:
                    self._checkpoint(conn)
        finally:
            if conn is not None:
                conn.close()
            if self._checkpointer is not None:
                self._checkpointer._queue.put(None)

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """Queue a background checkpoint every :data:`CHECKPOINT_EVERY` commits; past :data:`WAL_LIMIT`, run one."""
        assert self._checkpointer is not None
        if self._wal_frames >= WAL_LIMIT:
            _passive_checkpoint(conn)
            self._wal_frames = 0  # all copied back: the next commit starts the WAL over
        elif self._commits >= CHECKPOINT_EVERY and not self._checkpointing:
            self._commits = 0
            self._checkpointing = True
            self._checkpointer._queue.put((None, self._background_checkpoint, False))

    def _background_checkpoint(self, conn: sqlite3.Connection) -> None:
        """On the checkpoints' thread: copy what the WAL holds back, and note how long the WAL is."""
        try:
            self._wal_frames = _passive_checkpoint(conn)
        finally:
            self._checkpointing = False

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
        return await self.submit(work, transaction=transaction)

    def submit(self, work: Callable[[sqlite3.Connection], T], *, transaction: bool = True) -> asyncio.Future[T]:
        """Queue ``work`` as :meth:`run` does; its future is resolved when it has run (unless cancelled first).

        Raises:
            RuntimeError: The thread was closed.
        """
        if self._closed:
            raise RuntimeError(f"the SQLite {self.name} {self.path!r} is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put((future, work, transaction))
        return future

    async def close(self) -> None:
        """Finish the queued units, close the connection and end the thread (and the checkpoints' thread)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        if self._checkpointer is not None:
            self._checkpointer._closed = True
            await asyncio.get_running_loop().run_in_executor(None, self._checkpointer._thread.join)
