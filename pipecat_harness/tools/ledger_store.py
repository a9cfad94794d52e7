"""The ledger's statements on the hot path, issued on each database's own driver.

Profiling the write lifecycle (insert ``executing``; update to ``succeeded``
with its outbox row) showed where the time went: SQLAlchemy Core over
``aiosqlite`` hopped threads once per statement and per ``BEGIN``/``COMMIT``
and compiled every statement, and over ``asyncpg`` paid a round trip per
statement plus transaction control. The store issues each transition as one
unit:

* SQLite: the whole transaction runs in one hop on a dedicated writer thread
  with a raw ``sqlite3`` connection (:class:`SqliteThread`); reads use a
  second thread, which WAL never blocks.
* PostgreSQL: one statement per transition on an ``asyncpg`` pool (the update
  and its outbox row are one ``WITH … UPDATE … RETURNING`` + ``INSERT``, so one
  round trip commits both); ``asyncpg`` prepares and caches each statement per
  connection. Settling commits are asynchronous (see :meth:`PostgresStore.update`):
  losing one to a server crash is the same as losing it to a worker crash,
  which recovery already handles; starting an operation is always durable.

DDL, the outbox's publishers and consumers and ad-hoc queries stay on
SQLAlchemy (:mod:`pipecat_harness.tools.storage`), on the same database.
"""

from __future__ import annotations

import asyncio
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import make_url

from pipecat_harness.tools.operation_state import ResourceBusy
from pipecat_harness.tools.sqlite_thread import SqliteThread

__all__ = [
    "OP_COLUMNS",
    "OUTBOX_COLUMNS",
    "LedgerStore",
    "PostgresStore",
    "SqliteStore",
    "Where",
    "is_memory_sqlite",
    "make_store",
]

#: The operations table's columns, in the order every row is read.
OP_COLUMNS = ("tenant", "idempotency_key", "scope", "attempt", "op_type", "request_hash", "status", "result",
              "error", "version", "created_at", "updated_at", "owner", "lease_until", "resource")
#: The outbox table's columns, in insert order.
OUTBOX_COLUMNS = ("event_id", "seq", "tenant", "idempotency_key", "event_type", "payload", "created_at",
                  "published_at", "attempts", "last_error", "claimed_by", "claimed_until")
_op_row = itemgetter(*OP_COLUMNS)
_outbox_row = itemgetter(*OUTBOX_COLUMNS)
_PG_OUTBOX_TYPES = ("varchar", "integer", "varchar", "varchar", "varchar", "text", "double precision",
                    "double precision", "integer", "text", "varchar", "double precision")

Where = Sequence[tuple[str, str, Any]]
"""Conditions ``(column, operator, value)``; operators ``=``, ``<>`` and ``prefix`` (a string prefix)."""


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class LedgerStore(ABC):
    """Hot-path statements of one database, shared by the ledgers of a process (any table prefix)."""

    def __init__(self) -> None:
        self._sql: dict[tuple[Any, ...], str] = {}

    @abstractmethod
    def _ph(self, n: int) -> str:
        """The placeholder of the ``n``-th parameter of a statement."""

    def _condition(self, where: Where, first: int) -> tuple[str, list[Any]]:
        parts: list[str] = []
        params: list[Any] = []
        for column, operator, value in where:
            if column not in OP_COLUMNS:
                raise ValueError(f"unknown ledger column {column!r}")
            slot = self._ph(first + len(params))
            if operator == "prefix":
                parts.append(f"{column} LIKE {slot} ESCAPE '\\'")
                value = _escape_like(value)
            elif operator in ("=", "<>"):
                parts.append(f"{column} {operator} {slot}")
            else:
                raise ValueError(f"unknown operator {operator!r}")
            params.append(value)
        return " AND ".join(parts) or "1=1", params

    def _insert_sql(self, prefix: str) -> str:
        key = ("insert", prefix)
        if key not in self._sql:
            slots = ", ".join(self._ph(i + 1) for i in range(len(OP_COLUMNS)))
            self._sql[key] = (f"INSERT INTO {prefix}operations ({', '.join(OP_COLUMNS)}) VALUES ({slots}) "
                              "ON CONFLICT DO NOTHING")
        return self._sql[key]

    #: The database's own clock in epoch seconds; every read returns it after the columns (leases are
    #: compared on the ledger's time, not on the clock of whichever host reads).
    clock_sql = ""

    def _columns(self) -> str:
        return f"{', '.join(OP_COLUMNS)}, {self.clock_sql}"

    def _select_sql(self, prefix: str, condition: str, order: str) -> str:
        return f"SELECT {self._columns()} FROM {prefix}operations WHERE {condition} ORDER BY {order}"

    def _get_sql(self, prefix: str) -> str:
        key = ("get", prefix)
        if key not in self._sql:
            self._sql[key] = (f"SELECT {self._columns()} FROM {prefix}operations "
                              f"WHERE tenant = {self._ph(1)} AND idempotency_key = {self._ph(2)}")
        return self._sql[key]

    def _update_parts(self, prefix: str, where: Where, changes: tuple[str, ...],
                      event: bool = False) -> tuple[str, list[Any]]:
        """The update's SQL (built once per shape: every write issues one) and its condition's parameters."""
        shape = (prefix, changes, *[(c, op) for c, op, _ in where], event)
        sql = self._sql.get(shape)
        if sql is not None and not any(op == "prefix" for _, op, _ in where):
            return sql, [value for _, _, value in where]
        condition, params = self._condition(where, len(changes) + 1)
        if sql is None:
            sets = ", ".join(f"{column} = {self._ph(i + 1)}" for i, column in enumerate(changes))
            sql = self._sql[shape] = self._with_event(
                prefix, f"UPDATE {prefix}operations SET {sets} WHERE {condition}", len(changes) + len(params),
            ) if event else f"UPDATE {prefix}operations SET {sets} WHERE {condition}"
        return sql, params

    def _with_event(self, prefix: str, update: str, used: int) -> str:
        """The statement(s) that also write an outbox row (PostgreSQL: one statement)."""
        return update

    @abstractmethod
    async def now(self) -> float:
        """The database's clock (epoch seconds)."""

    @abstractmethod
    async def insert(self, prefix: str, values: dict[str, Any]) -> Sequence[Any] | None:
        """Insert an operation row; ``None`` if inserted, else the row already stored under its key.

        Raises:
            ResourceBusy: Another unsettled operation holds the row's resource.
        """

    def insert_soon(self, prefix: str, values: dict[str, Any]) -> asyncio.Future[Sequence[Any] | None]:
        """:meth:`insert`, begun at once and carried on whoever waits for it (the default: in a task)."""
        return asyncio.ensure_future(self.insert(prefix, values))

    @abstractmethod
    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """Change the rows matching ``where`` (and write ``event`` to the outbox in the same commit if one did).

        Raises:
            ResourceBusy: The change would give a resource a second unsettled operation.
        """

    @abstractmethod
    async def get(self, prefix: str, tenant: str, key: str) -> Sequence[Any] | None:
        """The row of one operation."""

    @abstractmethod
    async def select(self, prefix: str, where: Where, order: str = "created_at") -> list[Sequence[Any]]:
        """The rows matching ``where``, in ``order``."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release the connections; the default holds none."""


class SqliteStore(LedgerStore):
    """A SQLite file: one writer thread, one reader thread (WAL lets reads run beside the writer)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._writer = SqliteThread(path, checkpoints=True)
        self._reader = SqliteThread(path)

    clock_sql = "(julianday('now') - 2440587.5) * 86400.0"

    def _ph(self, n: int) -> str:
        return "?"

    async def now(self) -> float:
        """See :class:`LedgerStore`."""
        sql = f"SELECT {self.clock_sql}"
        return float(await self._reader.run(lambda conn: conn.execute(sql).fetchone()[0], transaction=False))

    async def insert(self, prefix: str, values: dict[str, Any]) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        return await self.insert_soon(prefix, values)

    def insert_soon(self, prefix: str, values: dict[str, Any]) -> asyncio.Future[Sequence[Any] | None]:
        """See :class:`LedgerStore`: the writer thread's own future (no task)."""
        insert, get = self._insert_sql(prefix), self._get_sql(prefix)
        params = _op_row(values)
        ident = (values["tenant"], values["idempotency_key"])

        def work(conn: sqlite3.Connection) -> Sequence[Any] | None:
            if conn.execute(insert, params).rowcount == 1:
                return None
            row: Sequence[Any] | None = conn.execute(get, ident).fetchone()
            if row is None:
                raise ResourceBusy(f"resource {values['resource']!r} has an unsettled operation")
            return row

        return self._writer.submit(work)

    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """See :class:`LedgerStore`."""
        sql, condition_params = self._update_parts(prefix, where, tuple(changes))
        params = (*changes.values(), *condition_params)
        outbox = None
        if event is not None:
            key = ("outbox", prefix)
            if key not in self._sql:
                slots = ", ".join("?" for _ in OUTBOX_COLUMNS)
                self._sql[key] = f"INSERT INTO {prefix}outbox ({', '.join(OUTBOX_COLUMNS)}) VALUES ({slots})"
            outbox = (self._sql[key], _outbox_row(event))

        def work(conn: sqlite3.Connection) -> bool:
            try:
                changed = conn.execute(sql, params).rowcount
            except sqlite3.IntegrityError as exc:
                raise ResourceBusy(f"the resource has an unsettled operation ({exc})") from exc
            if changed and outbox is not None:
                conn.execute(*outbox)
            return bool(changed)

        return await self._writer.run(work)

    async def get(self, prefix: str, tenant: str, key: str) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        sql = self._get_sql(prefix)
        return await self._reader.run(lambda conn: conn.execute(sql, (tenant, key)).fetchone(), transaction=False)

    async def select(self, prefix: str, where: Where, order: str = "created_at") -> list[Sequence[Any]]:
        """See :class:`LedgerStore`."""
        condition, params = self._condition(where, 1)
        sql = self._select_sql(prefix, condition, order)
        return await self._reader.run(lambda conn: conn.execute(sql, params).fetchall(), transaction=False)

    async def close(self) -> None:
        """See :class:`LedgerStore`."""
        await asyncio.gather(self._writer.close(), self._reader.close())


class PostgresStore(LedgerStore):
    """PostgreSQL through one ``asyncpg`` pool per process and event loop.

    Args:
        dsn: A ``postgresql://`` DSN.
        max_connections: Largest pool size (calls beyond it wait for a connection).
    """

    def __init__(self, dsn: str, *, max_connections: int = 10) -> None:
        super().__init__()
        self.dsn = dsn
        self.max_connections = max_connections
        self._pool: Any = None
        self._opening = asyncio.Lock()

    clock_sql = "extract(epoch from clock_timestamp())::float8"

    def _ph(self, n: int) -> str:
        return f"${n}"

    async def now(self) -> float:
        """See :class:`LedgerStore`."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            return float(await conn.fetchval(f"SELECT {self.clock_sql}"))

    def _with_event(self, prefix: str, update: str, used: int) -> str:
        # A settling change commits without waiting for the WAL flush (the statement's own
        # transaction only). A database-server crash can lose the last few hundred
        # milliseconds of such commits; the record is then back to ``executing`` under its
        # owner, and recovery and reconciliation settle it as after a worker crash. The
        # insert that starts an operation, before any handler runs, stays synchronous.
        selected = ", ".join(f"${used + 1 + i}::{kind}" for i, kind in enumerate(_PG_OUTBOX_TYPES))
        return (f"WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)), "
                f"changed AS ({update} RETURNING 1) INSERT INTO {prefix}outbox ({', '.join(OUTBOX_COLUMNS)}) "
                f"SELECT {selected} FROM changed, relaxed")

    async def pool(self) -> Any:
        """The pool, opened on first use."""
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    import asyncpg

                    self._pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=self.max_connections,
                                                           reset=_keep_session)
        return self._pool

    async def insert(self, prefix: str, values: dict[str, Any]) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            status = await conn.execute(self._insert_sql(prefix), *_op_row(values))
            if status.endswith(" 1"):
                return None
            row: Sequence[Any] | None = await conn.fetchrow(self._get_sql(prefix), values["tenant"],
                                                            values["idempotency_key"])
            if row is None:
                raise ResourceBusy(f"resource {values['resource']!r} has an unsettled operation")
            return row

    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """See :class:`LedgerStore`."""
        sql, condition_params = self._update_parts(prefix, where, tuple(changes), event is not None)
        params = [*changes.values(), *condition_params]
        if event is not None:
            params += _outbox_row(event)
        import asyncpg

        pool = await self.pool()
        async with pool.acquire() as conn:
            try:
                status: str = await conn.execute(sql, *params)
            except asyncpg.UniqueViolationError as exc:
                if "resource" not in str(exc):
                    raise
                raise ResourceBusy(f"the resource has an unsettled operation ({exc})") from exc
        return not status.endswith(" 0")

    async def get(self, prefix: str, tenant: str, key: str) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            row: Sequence[Any] | None = await conn.fetchrow(self._get_sql(prefix), tenant, key)
            return row

    async def select(self, prefix: str, where: Where, order: str = "created_at") -> list[Sequence[Any]]:
        """See :class:`LedgerStore`."""
        condition, params = self._condition(where, 1)
        pool = await self.pool()
        async with pool.acquire() as conn:
            return list(await conn.fetch(self._select_sql(prefix, condition, order), *params))

    async def close(self) -> None:
        """See :class:`LedgerStore`."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


async def _keep_session(_connection: Any) -> None:
    """Nothing to reset when a connection goes back to the pool.

    asyncpg's default reset is a round trip per release (``RESET ALL``,
    ``UNLISTEN *``...), doubling the statements of a write. The store leaves no
    session state behind: its one setting (``synchronous_commit``) is local to
    a statement's own transaction, and it never listens, locks or keeps cursors.
    """


def is_memory_sqlite(url: str) -> bool:
    """Whether a ledger URL names an in-memory SQLite database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return False
    return (parsed.database or "") in ("", ":memory:") or parsed.query.get("mode") == "memory"


def make_store(url: str) -> LedgerStore:
    """The store for a SQLAlchemy ledger URL of a file SQLite database or of PostgreSQL.

    Raises:
        ValueError: An in-memory SQLite URL (the engine layer gives those a private file) or another database.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if is_memory_sqlite(url):
            raise ValueError(f"ledger URL {url!r}: an in-memory SQLite database cannot be shared by the ledger's "
                             "connections; pass a file URL or the default URL")
        return SqliteStore(parsed.database or "")
    if parsed.get_backend_name() == "postgresql":
        dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        return PostgresStore(dsn)
    raise ValueError(f"ledger URL {url!r}: only SQLite and PostgreSQL ledgers are supported")
