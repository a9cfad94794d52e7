"""The ledger's hot-path statements on PostgreSQL (:class:`PostgresStore`), through ``asyncpg``.

One statement per transition (see :mod:`pipecat_harness.tools.ledger_store`).
Connections come from one ``asyncpg`` pool per process and event loop, but a
statement that ends cleanly keeps its connection in the store for the next
one instead of releasing it: an ``asyncpg`` acquire and release (a shielded
task, the idle timer, the holder's bookkeeping) cost about as much CPU as the
statement itself, and a write makes two. A connection goes back to the pool
when a statement fails or is cancelled (the pool waits for a cancellation
to finish and replaces a broken connection), when a caller is waiting for
one, and when the store closes; one the server dropped while kept is handed
back the same way when next taken. The pool's size stays the bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pipecat_harness.tools.ledger_store import OUTBOX_COLUMNS, PG_OUTBOX_TYPES, LedgerStore, Where, op_row, outbox_row
from pipecat_harness.tools.operation_state import ResourceBusy

__all__ = ["PostgresStore"]


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
        self._closed_pool: Any = None  # statements still running at close give their connections back to it
        self._opening = asyncio.Lock()
        self._kept: list[Any] = []  # connections taken from the pool, free for the next statement
        self._waiting = 0  # callers waiting for the pool

    clock_sql = "extract(epoch from clock_timestamp())::float8"

    def _ph(self, n: int) -> str:
        return f"${n}"

    async def now(self) -> float:
        """See :class:`LedgerStore`."""
        conn = await self._take()
        try:
            now = float(await conn.fetchval(f"SELECT {self.clock_sql}"))
        except BaseException:
            await self._give_back(conn)
            raise
        await self._done(conn)
        return now

    def _with_event(self, prefix: str, update: str, used: int) -> str:
        # A settling change commits without waiting for the WAL flush (the statement's own
        # transaction only). A database-server crash can lose the last few hundred
        # milliseconds of such commits; the record is then back to ``executing`` under its
        # owner, and recovery and reconciliation settle it as after a worker crash. The
        # insert that starts an operation, before any handler runs, stays synchronous.
        selected = ", ".join(f"${used + 1 + i}::{kind}" for i, kind in enumerate(PG_OUTBOX_TYPES))
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

    async def _take(self) -> Any:
        """A connection: a kept one if there is one, else from the pool."""
        while self._kept:
            conn = self._kept.pop()
            if not conn.is_closed():
                return conn
            await self._give_back(conn)  # the server or the network dropped it: the pool replaces it
        pool = self._pool if self._pool is not None else await self.pool()
        self._waiting += 1
        try:
            return await pool.acquire()
        finally:
            self._waiting -= 1

    async def _done(self, conn: Any) -> None:
        """After a statement that ended cleanly: keep the connection, unless someone waits for the pool."""
        if self._waiting or self._pool is None:
            await self._give_back(conn)
        else:
            self._kept.append(conn)

    async def _give_back(self, conn: Any) -> None:
        """Release a connection to the pool (which resets, or replaces, what a failure left)."""
        await (self._pool or self._closed_pool).release(conn)

    async def insert(self, prefix: str, values: dict[str, Any]) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        conn = await self._take()
        try:
            status = await conn.execute(self._insert_sql(prefix), *op_row(values))
            row: Sequence[Any] | None = None
            if not status.endswith(" 1"):
                row = await conn.fetchrow(self._get_sql(prefix), values["tenant"], values["idempotency_key"])
                if row is None:
                    raise ResourceBusy(f"resource {values['resource']!r} has an unsettled operation")
        except BaseException:
            await self._give_back(conn)
            raise
        await self._done(conn)
        return row

    async def update(self, prefix: str, where: Where, changes: dict[str, Any],
                     event: dict[str, Any] | None = None) -> bool:
        """See :class:`LedgerStore`."""
        sql, condition_params = self._update_parts(prefix, where, tuple(changes), event is not None)
        params = [*changes.values(), *condition_params]
        if event is not None:
            params += outbox_row(event)
        import asyncpg

        conn = await self._take()
        try:
            status: str = await conn.execute(sql, *params)
        except BaseException as exc:
            await self._give_back(conn)
            if isinstance(exc, asyncpg.UniqueViolationError) and "resource" in str(exc):
                raise ResourceBusy(f"the resource has an unsettled operation ({exc})") from exc
            raise
        await self._done(conn)
        return not status.endswith(" 0")

    async def get(self, prefix: str, tenant: str, key: str) -> Sequence[Any] | None:
        """See :class:`LedgerStore`."""
        conn = await self._take()
        try:
            row: Sequence[Any] | None = await conn.fetchrow(self._get_sql(prefix), tenant, key)
        except BaseException:
            await self._give_back(conn)
            raise
        await self._done(conn)
        return row

    async def select(self, prefix: str, where: Where, order: str = "created_at") -> list[Sequence[Any]]:
        """See :class:`LedgerStore`."""
        condition, params = self._condition(where, 1)
        conn = await self._take()
        try:
            rows = list(await conn.fetch(self._select_sql(prefix, condition, order), *params))
        except BaseException:
            await self._give_back(conn)
            raise
        await self._done(conn)
        return rows

    async def close(self) -> None:
        """See :class:`LedgerStore`."""
        if self._pool is not None:
            pool = self._closed_pool = self._pool
            self._pool = None
            kept, self._kept = self._kept, []
            for conn in kept:
                await pool.release(conn)
            await pool.close()


async def _keep_session(_connection: Any) -> None:
    """Nothing to reset when a connection goes back to the pool.

    asyncpg's default reset is a round trip per release (``RESET ALL``,
    ``UNLISTEN *``...), doubling the statements of a write. The store leaves no
    session state behind: its one setting (``synchronous_commit``) is local to
    a statement's own transaction, and it never listens, locks or keeps cursors.
    """
