"""The SQL audit store (the ``sqlite`` extra): one row per verdict, supported ones included, and the operator's review.

SQLAlchemy async Core for SQLite and PostgreSQL; on a SQLite file a turn's rows are inserted through a ``sqlite3``
connection on a thread of its own (``SqliteThread``), which ``scripts/bench_grader.py`` measured as much faster.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Collection
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text, func, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from pipecat_harness.grader.audit_row import REVIEW_STATUS, AuditRow, ReviewAction, ReviewEvent
from pipecat_harness.grader.verdict import FLAGGED
from pipecat_harness.tools.sqlite_thread import SqliteThread

__all__ = ["DEFAULT_AUDIT_URL", "REVIEW_STATUS", "AuditRow", "AuditStore", "ReviewAction", "ReviewEvent", "day_start",
           "within_days"]

DEFAULT_AUDIT_URL = "sqlite+aiosqlite:///grader_audit.db"


def day_start(day: date) -> float:
    """Unix time of the start of a UTC day."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def within_days(column: Any, since: date | None, until: date | None) -> list[Any]:
    """Conditions keeping a Unix-time ``column`` within the UTC days ``since`` to ``until`` (both included)."""
    start = [column >= day_start(since)] if since is not None else []
    return start + ([column < day_start(until + timedelta(days=1))] if until is not None else [])


def _review_table(metadata: MetaData, name: str) -> Table:
    return Table(name, metadata, Column("id", Integer, primary_key=True, autoincrement=True),
                 Column("row_id", Integer, nullable=False, index=True), Column("action", String(16), nullable=False),
                 Column("status", String(16), nullable=False), Column("note", Text, nullable=False),
                 Column("actor", String(128), nullable=False), Column("at", Float, nullable=False))


def _table(metadata: MetaData, name: str) -> Table:
    return Table(name, metadata, Column("id", Integer, primary_key=True, autoincrement=True),
                 Column("created_at", Float, nullable=False), Column("tenant", String(128), nullable=False, index=True),
                 Column("call_id", String(128), nullable=False, index=True), Column("turn_id", Integer, nullable=False),
                 Column("utterance", Text, nullable=False), Column("caller_utterance", Text),
                 Column("verdict", String(32), nullable=False, index=True),
                 Column("category", String(32), nullable=False), Column("claim", Text, nullable=False),
                 Column("constraint_ref", String(256)), Column("rationale", Text, nullable=False),
                 Column("confidence", Float, nullable=False), Column("grader_model", String(128), nullable=False),
                 Column("constraints_version", String(128), nullable=False),
                 Column("severity", String(16), nullable=False), Column("review_status", String(16), nullable=False),
                 Column("review_note", Text, nullable=False), Column("reviewed_at", Float))


class AuditStore:
    """Audit rows in SQLite or PostgreSQL (``engine``: an async engine or a database URL)."""

    def __init__(self, engine: AsyncEngine | str = DEFAULT_AUDIT_URL, *, table_name: str = "grader_audit") -> None:
        if isinstance(engine, str):
            url = make_url(engine)
            if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
                Path(url.database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_async_engine(engine)
        self.engine = engine
        database = engine.url.database or ""
        on_file = engine.url.get_backend_name() == "sqlite" and database not in ("", ":memory:")
        #: The SQLite file whose rows a thread of its own writes (``None``: SQLAlchemy writes them).
        self._writer_path = database if on_file and not database.startswith("file:") else None
        self._writer: SqliteThread | None = None
        self._metadata = MetaData()
        self.table = _table(self._metadata, table_name)
        #: Every review action, oldest first per row (the row keeps only the latest).
        self.reviews = _review_table(self._metadata, f"{table_name}_reviews")

    async def create_tables(self) -> None:
        """Create the table if it does not exist."""
        async with self.engine.begin() as conn:
            await conn.run_sync(self._metadata.create_all)

    async def drop_tables(self) -> None:
        """Drop the table."""
        async with self.engine.begin() as conn:
            await conn.run_sync(self._metadata.drop_all)

    async def close(self) -> None:
        """Release the engine's connections and end the writer thread."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await writer.close()
        await self.engine.dispose()

    async def write(self, row: AuditRow) -> AuditRow:
        """Insert a row; returns it with ``id`` set."""
        return (await self.write_many([row]))[0]

    async def write_many(self, rows: list[AuditRow]) -> list[AuditRow]:
        """Insert the rows of one turn in one transaction; returns them with ``id`` set."""
        values = [{name: value for name, value in row.to_dict().items() if name != "id"} for row in rows]
        if self._writer_path is not None and rows:
            return await self._write_on_thread(rows, values)
        async with self.engine.begin() as conn:
            for row, value in zip(rows, values, strict=True):
                result = await conn.execute(self.table.insert().values(**value).returning(self.table.c.id))
                row.id = int(result.scalar_one())
        return rows

    async def _write_on_thread(self, rows: list[AuditRow], values: list[dict[str, Any]]) -> list[AuditRow]:
        if self._writer is None:
            assert self._writer_path is not None
            self._writer = SqliteThread(self._writer_path, name="grader audit")
        columns = list(values[0])
        statement = f'INSERT INTO "{self.table.name}" ({", ".join(columns)}) VALUES ({", ".join("?" * len(columns))})'

        def insert(conn: sqlite3.Connection) -> list[int]:
            return [int(conn.execute(statement, [v[c] for c in columns]).lastrowid or 0) for v in values]

        for row, row_id in zip(rows, await self._writer.run(insert), strict=True):
            row.id = row_id
        return rows

    async def get(self, row_id: int) -> AuditRow | None:
        """Return one row by id."""
        rows = await self.select(select(self.table).where(self.table.c.id == row_id))
        return rows[0] if rows else None

    async def rows(self, *, call_id: str | None = None, tenant: str | None = None) -> list[AuditRow]:
        """Rows oldest first, optionally of one call or tenant."""
        where = {name: value for name, value in (("call_id", call_id), ("tenant", tenant)) if value is not None}
        return await self.select(select(self.table).filter_by(**where).order_by(self.table.c.id))

    async def flagged(self, *where: Any, limit: int = 200, status: str | None = None,
                      tenants: Collection[str] | None = None) -> list[AuditRow]:
        """Flagged rows newest first, at most ``limit``, on ``where`` conditions, of a ``status`` and ``tenants``."""
        query = select(self.table).where(self.table.c.verdict.in_(sorted(FLAGGED)), *where)
        if tenants is not None:
            query = query.where(self.table.c.tenant.in_(sorted(tenants)))
        if status is not None:
            query = query.where(self.table.c.review_status == status)
        return await self.select(query.order_by(self.table.c.id.desc()).limit(limit))

    async def count(self) -> int:
        """Number of rows."""
        async with self.engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(self.table))).scalar_one())

    async def review(self, row_id: int, action: str, note: str = "", *, actor: str = "") -> AuditRow:
        """Record an operator's ``action`` on a row (who, why) in its review history; ``ValueError``, ``KeyError``."""
        if action not in REVIEW_STATUS:
            raise ValueError(f"unknown review action {action!r}; use one of {sorted(REVIEW_STATUS)}")
        now, status = time.time(), REVIEW_STATUS[action]
        async with self.engine.begin() as conn:
            changed = update(self.table).where(self.table.c.id == row_id)
            result = await conn.execute(changed.values(review_status=status, review_note=note, reviewed_at=now))
            if result.rowcount == 0:
                raise KeyError(f"no audit row {row_id}")
            event = {"row_id": row_id, "action": action, "status": status, "note": note, "actor": actor, "at": now}
            await conn.execute(self.reviews.insert().values(**event))
        row = await self.get(row_id)
        assert row is not None
        return row

    async def history(self, row_ids: list[int]) -> dict[int, list[ReviewEvent]]:
        """Review actions of the given rows, oldest first, by row id."""
        found: dict[int, list[ReviewEvent]] = {row_id: [] for row_id in row_ids}
        if not row_ids:
            return found
        query = select(self.reviews).where(self.reviews.c.row_id.in_(row_ids)).order_by(self.reviews.c.id)
        async with self.engine.connect() as conn:
            for event in (ReviewEvent(**dict(record._mapping)) for record in (await conn.execute(query)).all()):
                found[event.row_id].append(event)
        return found

    async def select(self, query: Any) -> list[AuditRow]:
        """The rows a ``select(store.table)`` query finds."""
        async with self.engine.connect() as conn:
            return [AuditRow(**dict(r._mapping)) for r in (await conn.execute(query)).all()]
