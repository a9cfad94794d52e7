"""Tables and engines of the operation ledger and its outbox: one database, so a change and its event commit at once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text, event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.schema import PrimaryKeyConstraint, UniqueConstraint

__all__ = ["DEFAULT_LEDGER_URL", "LedgerTables", "ledger_tables", "make_engine"]

#: Embedded default: an in-memory SQLite database private to the process.
DEFAULT_LEDGER_URL = "sqlite+aiosqlite://"

_UNSETTLED = text("resource <> '' AND status IN ('executing', 'outcome_unknown')")
_WHERE_UNSETTLED: dict[str, Any] = {"sqlite_where": _UNSETTLED, "postgresql_where": _UNSETTLED}

_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")


@dataclass(frozen=True)
class LedgerTables:
    """The ledger's tables under one name prefix."""

    metadata: MetaData
    operations: Table
    outbox: Table
    consumed: Table


def ledger_tables(prefix: str = "harness_") -> LedgerTables:
    """Return the tables ``<prefix>operations``, ``outbox`` and ``consumed`` (``prefix``: a plain identifier)."""
    if not _PREFIX.match(prefix):
        raise ValueError(f"table prefix {prefix!r} must be letters, digits and underscores")
    metadata = MetaData()
    operations = Table(
        f"{prefix}operations", metadata,
        Column("tenant", String(128), nullable=False), Column("idempotency_key", String(512), nullable=False),
        Column("scope", String(512), nullable=False), Column("attempt", Integer, nullable=False, default=0),
        Column("op_type", String(128), nullable=False), Column("request_hash", String(64), nullable=False),
        Column("status", String(32), nullable=False), Column("result", Text, nullable=True),
        Column("error", Text, nullable=True), Column("version", Integer, nullable=False),
        Column("created_at", Float, nullable=False), Column("updated_at", Float, nullable=False),
        Column("owner", String(128), nullable=False, default=""),
        Column("lease_until", Float, nullable=False, default=0.0),
        Column("resource", String(256), nullable=False, default=""),
        PrimaryKeyConstraint("tenant", "idempotency_key", name=f"{prefix}operations_pk"),
        Index(f"{prefix}operations_scope", "scope"),
        # Recovery and reconciliation look for the few executing/unknown records: no cost growing with the ledger.
        Index(f"{prefix}operations_status", "status", "tenant"),
        # At most one operation per resource (qualified by its call) is unsettled, whichever process starts it.
        Index(f"{prefix}operations_resource_claim", "tenant", "resource", unique=True, **_WHERE_UNSETTLED))
    outbox = Table(
        f"{prefix}outbox", metadata,
        Column("event_id", String(36), primary_key=True), Column("seq", Integer, nullable=False),
        Column("tenant", String(128), nullable=False), Column("idempotency_key", String(512), nullable=False),
        Column("event_type", String(64), nullable=False), Column("payload", Text, nullable=False),
        Column("created_at", Float, nullable=False), Column("published_at", Float, nullable=True),
        Column("attempts", Integer, nullable=False, default=0), Column("last_error", Text, nullable=True),
        Column("claimed_by", String(64), nullable=True), Column("claimed_until", Float, nullable=False, default=0.0),
        UniqueConstraint("tenant", "idempotency_key", "seq", name=f"{prefix}outbox_op_seq"),
        Index(f"{prefix}outbox_pending", "published_at", "created_at"))
    consumed = Table(
        f"{prefix}consumed", metadata,
        Column("consumer", String(128), nullable=False), Column("event_id", String(36), nullable=False),
        Column("consumed_at", Float, nullable=False),
        PrimaryKeyConstraint("consumer", "event_id", name=f"{prefix}consumed_pk"))
    return LedgerTables(metadata, operations, outbox, consumed)


def make_engine(url: str = DEFAULT_LEDGER_URL) -> AsyncEngine:
    """An async engine for a ledger URL: in-memory SQLite on one shared connection, file SQLite waiting for locks."""
    if url.startswith("sqlite"):
        if url.rstrip("/") in ("sqlite+aiosqlite:", "sqlite+aiosqlite:/") or ":memory:" in url:
            return create_async_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_wal)
        return engine
    return create_async_engine(url, pool_recycle=1800)


def _sqlite_wal(dbapi_connection: Any, _record: Any) -> None:
    # WAL with synchronous=NORMAL keeps commits durable against process crashes without an fsync per transaction.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
