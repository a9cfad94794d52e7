"""The ledger's hot-path statements on each database's own driver, each transition as one unit.

SQLAlchemy paid a thread hop (``aiosqlite``) or a round trip (``asyncpg``) per statement and per transaction
control. Here a SQLite transaction is one hop to a writer thread (reads on a second, which WAL never blocks), and a
PostgreSQL change with its outbox row is one ``WITH … UPDATE … RETURNING`` + ``INSERT`` statement.
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

__all__ = ["OP_COLUMNS", "OUTBOX_COLUMNS", "LedgerStore", "PostgresStore", "SqliteStore", "Where", "is_memory_sqlite",
           "make_store"]

#: The operations table's columns, in the order every row is read.
OP_COLUMNS = tuple("tenant idempotency_key scope attempt op_type request_hash status result error version created_at "
                   "updated_at owner lease_until resource".split())
#: The outbox table's columns, in insert order.
OUTBOX_COLUMNS = tuple("event_id seq tenant idempotency_key event_type payload created_at published_at attempts "
                       "last_error claimed_by claimed_until".split())
_PG_OUTBOX_TYPES = "varchar integer varchar varchar varchar text float8 float8 integer text varchar float8".split()
_op_row = itemgetter(*OP_COLUMNS)
_outbox_row = itemgetter(*OUTBOX_COLUMNS)

Where = Sequence[tuple[str, str, Any]]
"""Conditions ``(column, operator, value)``; operators ``=``, ``<>`` and ``prefix`` (a string prefix)."""


def _stored(row: Sequence[Any] | None, values: dict[str, Any]) -> Sequence[Any]:
    """The row stored under the key an insert did not take; none means another operation holds its resource."""
    if row is None:
        raise ResourceBusy(f"resource {values['resource']!r} has an unsettled operation")
    return row


class LedgerStore(ABC):
    """Hot-path statements of one database, shared by the ledgers of a process (any table prefix)."""

    #: The database's own clock in epoch seconds; every read returns it after the columns (leases are compared on
    #: the ledger's time, not on the clock of whichever host reads).
    clock_sql = ""

    def __init__(self) -> None:
        self._sql: dict[tuple[Any, ...], str] = {}
        self._fixed: dict[str, tuple[str, str, str]] = {}

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
                value = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            elif operator in ("=", "<>"):
                parts.append(f"{column} {operator} {slot}")
            else:
                raise ValueError(f"unknown operator {operator!r}")
            params.append(value)
        return " AND ".join(parts) or "1=1", params

    def _columns(self) -> str:
        return f"{', '.join(OP_COLUMNS)}, {self.clock_sql}"

    def _statements(self, prefix: str) -> tuple[str, str, str]:
        """The operation insert and get, and the outbox insert, of a table prefix (built once)."""
        if prefix not in self._fixed:
            ph, columns = self._ph, self._columns()
            slots = ", ".join(ph(i + 1) for i in range(len(OP_COLUMNS)))
            outbox_slots = ", ".join(ph(i + 1) for i in range(len(OUTBOX_COLUMNS)))
            self._fixed[prefix] = (
                f"INSERT INTO {prefix}operations ({', '.join(OP_COLUMNS)}) VALUES ({slots}) ON CONFLICT DO NOTHING",
                f"SELECT {columns} FROM {prefix}operations WHERE tenant = {ph(1)} AND idempotency_key = {ph(2)}",
                f"INSERT INTO {prefix}outbox ({', '.join(OUTBOX_COLUMNS)}) VALUES ({outbox_slots})")
        return self._fixed[prefix]

    def _select_sql(self, prefix: str, condition: str, order: str) -> str:
        return f"SELECT {self._columns()} FROM {prefix}operations WHERE {condition} ORDER BY {order}"

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
            update = f"UPDATE {prefix}operations SET {sets} WHERE {condition}"
            sql = self._sql[shape] = self._with_event(prefix, update, len(changes) + len(params)) if event else update
        return sql, params

    def _with_event(self, prefix: str, update: str, used: int) -> str:
        """The statement(s) that also write an outbox row (PostgreSQL: one statement)."""
        return update

    @abstractmethod
    async def now(self) -> float:
        """The database's clock (epoch seconds)."""

    @abstractmethod
    async def insert(self, prefix: str, values: dict[str, Any]) -> Sequence[Any] | None:
        """Insert an operation row; ``None``, or the row stored under its key (``ResourceBusy``: resource claimed)."""

    def insert_soon(self, prefix: str, values: dict[str, Any]) -> asyncio.Future[Sequence[Any] | None]:
        """:meth:`insert`, begun at once and carried on whoever waits for it (the default: in a task)."""
        return asyncio.ensure_future(self.insert(prefix, values))

    @abstractmethod
    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """Change the rows matching ``where``, with ``event`` in the same commit if any (``ResourceBusy``: claimed)."""

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

    clock_sql = "(julianday('now') - 2440587.5) * 86400.0"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._writer = SqliteThread(path, checkpoints=True)
        self._reader = SqliteThread(path)

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
        insert, get, _ = self._statements(prefix)
        params, ident = _op_row(values), (values["tenant"], values["idempotency_key"])

        def work(conn: sqlite3.Connection) -> Sequence[Any] | None:
            if conn.execute(insert, params).rowcount == 1:
                return None
            return _stored(conn.execute(get, ident).fetchone(), values)

        return self._writer.submit(work)

    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """See :class:`LedgerStore`."""
        sql, condition_params = self._update_parts(prefix, where, tuple(changes))
        params = (*changes.values(), *condition_params)
        outbox = None if event is None else (self._statements(prefix)[2], _outbox_row(event))

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
        sql = self._statements(prefix)[1]
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
    """PostgreSQL through one ``asyncpg`` pool of at most ``max_connections`` per process and event loop."""

    clock_sql = "extract(epoch from clock_timestamp())::float8"

    def __init__(self, dsn: str, *, max_connections: int = 10) -> None:
        super().__init__()
        self.dsn = dsn
        self.max_connections = max_connections
        self._pool: Any = None
        self._opening = asyncio.Lock()

    def _ph(self, n: int) -> str:
        return f"${n}"

    async def now(self) -> float:
        """See :class:`LedgerStore`."""
        async with (await self.pool()).acquire() as conn:
            return float(await conn.fetchval(f"SELECT {self.clock_sql}"))

    def _with_event(self, prefix: str, update: str, used: int) -> str:
        # A settling change commits without waiting for the WAL flush (its own transaction only). A server crash can
        # lose the last few hundred milliseconds of those: the record is back to ``executing`` under its owner, and
        # recovery settles it as after a worker crash. The insert that starts an operation stays synchronous.
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

                    pool = asyncpg.create_pool(self.dsn, min_size=1, max_size=self.max_connections, reset=_keep_session)
                    self._pool = await pool
        return self._pool

    async def insert(self, prefix: str, values: dict[str, Any]) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        insert, get, _ = self._statements(prefix)
        async with (await self.pool()).acquire() as conn:
            if (await conn.execute(insert, *_op_row(values))).endswith(" 1"):
                return None
            return _stored(await conn.fetchrow(get, values["tenant"], values["idempotency_key"]), values)

    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """See :class:`LedgerStore`."""
        sql, condition_params = self._update_parts(prefix, where, tuple(changes), event is not None)
        params = [*changes.values(), *condition_params, *(_outbox_row(event) if event is not None else ())]
        import asyncpg

        async with (await self.pool()).acquire() as conn:
            try:
                status: str = await conn.execute(sql, *params)
            except asyncpg.UniqueViolationError as exc:
                if "resource" not in str(exc):
                    raise
                raise ResourceBusy(f"the resource has an unsettled operation ({exc})") from exc
        return not status.endswith(" 0")

    async def get(self, prefix: str, tenant: str, key: str) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        async with (await self.pool()).acquire() as conn:
            return await conn.fetchrow(self._statements(prefix)[1], tenant, key)

    async def select(self, prefix: str, where: Where, order: str = "created_at") -> list[Sequence[Any]]:
        """See :class:`LedgerStore`."""
        condition, params = self._condition(where, 1)
        async with (await self.pool()).acquire() as conn:
            return list(await conn.fetch(self._select_sql(prefix, condition, order), *params))

    async def close(self) -> None:
        """See :class:`LedgerStore`."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


async def _keep_session(_connection: Any) -> None:
    """Nothing to reset on release: asyncpg's default reset (``RESET ALL``...) doubled a write's round trips.

    The store leaves no session state: its one setting is local to a statement's transaction.
    """


def is_memory_sqlite(url: str) -> bool:
    """Whether a ledger URL names an in-memory SQLite database."""
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and (
        (parsed.database or "") in ("", ":memory:") or parsed.query.get("mode") == "memory")


def make_store(url: str) -> LedgerStore:
    """The store for the ledger URL of a file SQLite database or of PostgreSQL (``ValueError`` for others)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if is_memory_sqlite(url):
            raise ValueError(f"ledger URL {url!r}: an in-memory SQLite database cannot be shared by the ledger's "
                             "connections; pass a file URL or the default URL")
        return SqliteStore(parsed.database or "")
    if parsed.get_backend_name() == "postgresql":
        return PostgresStore(parsed.set(drivername="postgresql").render_as_string(hide_password=False))
    raise ValueError(f"ledger URL {url!r}: only SQLite and PostgreSQL ledgers are supported")
