"""One raw ``sqlite3`` connection served by a dedicated thread, a whole unit of work per hop.

``aiosqlite`` behind SQLAlchemy paid a thread hop per statement and per ``BEGIN``/``COMMIT`` (about nine per ledger
write): hundreds of writes per second where plain ``sqlite3`` did thousands. Units queued meanwhile run together and
are answered in one wake-up of the loop. WAL checkpoints (an ``fsync`` per file) took over half of the writer's
time: with ``checkpoints=True`` passive ones run on a thread of their own every :data:`CHECKPOINT_EVERY` commits,
and past :data:`WAL_LIMIT` frames (so the WAL can start over) the writer runs one between units.
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


def _passive_checkpoint(conn: sqlite3.Connection) -> int:
    """Copy committed WAL frames back to the database file without waiting for anyone; the WAL's length."""
    try:
        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error:  # another connection is checkpointing
        return 0
    return int(row[1]) if row is not None else 0


def _resolve_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        if future.done():  # the caller was cancelled; the unit ran (or not) all the same
            continue
        future.set_exception(error) if error is not None else future.set_result(result)


class SqliteThread:
    """A thread owning one ``sqlite3`` connection (WAL, ``synchronous=NORMAL``); ``name`` says what the database is."""

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
        # Switching a new file to WAL takes an exclusive lock without waiting for another connection's lock as
        # statements do (it fails "database is locked" at once): retried briefly, and opened when first needed.
        for attempt in range(50):
            conn = None
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._busy_timeout_secs)
                # Durable against process crashes without an fsync per transaction; readers never block writers.
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
                batch: list[_Unit | None] = [self._queue.get()]
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
                    conn = conn or self._connect()
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
            reason = f"cannot open the SQLite {self.name} {self.path!r}: {self._open_error}"
            return None, sqlite3.OperationalError(reason)
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
        """Run ``work(connection)`` in the thread, in one transaction (rolled back if it raises) unless told not to."""
        return await self.submit(work, transaction=transaction)

    def submit(self, work: Callable[[sqlite3.Connection], T], *, transaction: bool = True) -> asyncio.Future[T]:
        """Queue ``work`` as :meth:`run` does; its future is resolved when it has run (unless cancelled first)."""
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
