"""The SQLite thread: answers reach every loop that waits, and the ledger's writer leaves WAL checkpoints to a thread
of their own while the WAL still starts over."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from pipecat_harness.tools import sqlite_thread
from pipecat_harness.tools.sqlite_thread import SqliteThread


def _insert(n: int):
    def work(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (n, pad) VALUES (?, ?)", (n, "x" * 3000))
    return work


async def test_a_checkpointing_writer_never_checkpoints_on_its_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sqlite_thread, "CHECKPOINT_EVERY", 4)
    path = str(tmp_path / "ledger.db")
    writer = SqliteThread(path, checkpoints=True)
    try:
        assert await writer.run(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0],
                                transaction=False) == 0
        await writer.run(lambda c: c.execute("CREATE TABLE t (n INTEGER, pad TEXT)"))
        for n in range(8):
            await writer.run(_insert(n))
        assert writer._checkpointer is not None
        await writer._checkpointer.run(lambda c: None, transaction=False)  # after the queued checkpoint
        assert writer._wal_frames > 0  # the background checkpoint ran and measured the WAL
    finally:
        await writer.close()
    with sqlite3.connect(path) as conn:  # every commit is there
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 8


async def test_past_the_wal_limit_the_writer_checkpoints_and_the_wal_starts_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sqlite_thread, "CHECKPOINT_EVERY", 4)
    monkeypatch.setattr(sqlite_thread, "WAL_LIMIT", 2)
    path = str(tmp_path / "ledger.db")
    writer = SqliteThread(path, checkpoints=True)
    assert writer._checkpointer is not None
    try:
        await writer.run(lambda c: c.execute("CREATE TABLE t (n INTEGER, pad TEXT)"))
        for round_ in range(10):
            for n in range(20):  # a page or more each
                await writer.run(_insert(20 * round_ + n))
            # The background checkpoints have run and found the WAL past its limit: the next commit makes the
            # writer checkpoint itself, and the one after starts the WAL over.
            await writer._checkpointer.run(lambda c: None, transaction=False)
        # 200 commits: a WAL that never started over would hold 200 frames or more, one round's about 20.
        assert os.path.getsize(f"{path}-wal") < 100 * 4096
    finally:
        await writer.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 200


def test_every_loop_that_uses_a_thread_gets_its_answers(tmp_path: Path):
    thread = SqliteThread(str(tmp_path / "ledger.db"))

    async def select(n: int) -> int:
        return int(await thread.run(lambda c: c.execute("SELECT ?", (n,)).fetchone()[0], transaction=False))

    async def many() -> list[int]:  # queued together: answered in batches
        return list(await asyncio.gather(*(select(n) for n in range(200))))

    assert asyncio.run(many()) == list(range(200))  # a first loop, closed afterwards

    async def then_close() -> int:
        answer = await select(7)
        await thread.close()
        return answer

    assert asyncio.run(then_close()) == 7  # a second loop, on which the thread closes
