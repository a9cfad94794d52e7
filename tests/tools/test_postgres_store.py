"""The PostgreSQL store keeps a connection between clean statements, and never reuses one the server dropped."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from pipecat_harness.tools.postgres_store import PostgresStore
from tests.tools.conftest import postgres_ledger, unique_prefix


def _lost(conn: asyncpg.Connection) -> bool:
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # asyncpg took it back into its pool as it closed
        return True


async def test_a_kept_connection_the_server_drops_is_never_used_again():
    ledger = await postgres_ledger(unique_prefix())
    try:
        store = ledger.store
        assert isinstance(store, PostgresStore)
        record, created = await ledger.start("acme", "k1", "issue_refund", "h1")
        assert created and len(store._kept) == 1  # kept for the next statement, not released
        [kept] = store._kept
        probe = await asyncpg.connect(store.dsn)
        try:
            await probe.execute("SELECT pg_terminate_backend($1)", kept.get_server_pid())
        finally:
            await probe.close()
        for _ in range(500):  # until asyncpg has seen the connection go
            if _lost(kept):
                break
            await asyncio.sleep(0.01)
        stored = await ledger.get("acme", "k1")  # on another connection
        assert stored is not None and stored.version == record.version
        again, created_again = await ledger.start("acme", "k1", "issue_refund", "h1")
        assert not created_again and again.idempotency_key == "k1"
    finally:
        with contextlib.suppress(Exception):
            await ledger.drop_tables()
        await ledger.close()
