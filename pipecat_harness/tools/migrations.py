"""Bringing an existing ledger database up to the current table layout, keeping its records (unknown outcomes too).

Opening a ledger creates what is missing and adds, additively (old and new processes may share a database during a
rollout), the columns and indexes a newer layout introduced, under the version in ``<prefix>schema``. Not Alembic:
the tables sit under a prefix in the application's database, and every worker migrates them as it opens the ledger.
"""

from __future__ import annotations

from typing import Any

from loguru import logger
from sqlalchemy import Column, Connection, Float, Index, Integer, MetaData, String, Table, inspect, select, text
from sqlalchemy.exc import DBAPIError

from pipecat_harness.tools.storage import LedgerTables

__all__ = ["SCHEMA_VERSION", "SchemaTooNew", "migrate", "schema_table"]

#: The table layout this version writes. 1: operations, outbox, consumed; 2: owner leases and resources on operations,
#: publisher claims on the outbox, the (status, tenant) index; 3: the unique claim of a resource by its unsettled
#: operation.
SCHEMA_VERSION = 3

# Values for rows that existed before a column was added (a NOT NULL column needs one).
_BACKFILL: dict[str, Any] = {"owner": "", "lease_until": 0.0, "resource": "", "claimed_until": 0.0, "attempt": 0}


class SchemaTooNew(RuntimeError):
    """The ledger database was written by a newer harness version."""


def schema_table(prefix: str, metadata: MetaData | None = None) -> Table:
    """The ``<prefix>schema`` table: one row per component with its layout version."""
    columns = (Column("version", Integer, nullable=False), Column("migrated_at", Float, nullable=False))
    return Table(f"{prefix}schema", metadata or MetaData(), Column("component", String(64), primary_key=True), *columns)


def _add_column(conn: Connection, table: Table, column: Column[Any]) -> None:
    kind = column.type.compile(dialect=conn.dialect)
    clause = f"ADD COLUMN {'IF NOT EXISTS ' if conn.dialect.name == 'postgresql' else ''}{column.name} {kind}"
    if not column.nullable:
        default = _BACKFILL.get(column.name, "")
        literal = repr(default) if isinstance(default, int | float) else "'" + str(default).replace("'", "''") + "'"
        clause += f" NOT NULL DEFAULT {literal}"
    try:
        conn.execute(text(f"ALTER TABLE {table.name} {clause}"))
    except DBAPIError as exc:  # another process added it first (SQLite has no IF NOT EXISTS here)
        if "duplicate column" not in str(exc).lower():
            raise


def _add_unique_index(conn: Connection, index: Index) -> None:
    """Add a unique index in a savepoint: rows an older version left may violate it (then it is skipped, logged)."""
    try:
        with conn.begin_nested():
            index.create(conn, checkfirst=True)
    except DBAPIError as exc:
        logger.warning(f"ledger index {index.name} not added ({exc.orig}); settle the older records it names first")


def migrate(conn: Connection, tables: LedgerTables, prefix: str, now: float) -> int:
    """Create or upgrade the ledger's tables in one transaction; return the version found (0: new; ``SchemaTooNew``)."""
    versions = schema_table(prefix)
    inspector = inspect(conn)
    existing = set(inspector.get_table_names())
    found = 0
    if versions.name in existing:
        found = conn.execute(select(versions.c.version).where(versions.c.component == "ledger")).scalar() or 0
    elif tables.operations.name in existing:
        found = 1  # the tables predate the version row
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(f"ledger tables {prefix}* are at schema version {found}, newer than this harness "
                           f"({SCHEMA_VERSION}); upgrade pipecat-harness or use another ledger_table_prefix")
    versions.create(conn, checkfirst=True)
    for table in tables.metadata.sorted_tables:
        if table.name not in existing:
            table.create(conn)
            continue
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present:
                _add_column(conn, table, column)
        for index in table.indexes:
            if index.unique and index.name not in {i["name"] for i in inspector.get_indexes(table.name)}:
                _add_unique_index(conn, index)
            else:
                index.create(conn, checkfirst=True)
    if found < SCHEMA_VERSION:
        conn.execute(versions.delete().where(versions.c.component == "ledger"))
        conn.execute(versions.insert().values(component="ledger", version=SCHEMA_VERSION, migrated_at=now))
    return found
