"""A ledger database written with the first table layout opens with this version, records intact."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from pipecat_harness.tools import OperationLedger, OperationStatus, Reconciliation, ToolGate
from pipecat_harness.tools.migrations import SCHEMA_VERSION, SchemaTooNew, schema_table
from tests.services import postgres_url
from tests.tools.conftest import unique_prefix

S = OperationStatus

# The first layout: no owner leases, resources, publisher claims, status index or version row.
_OLD_SCHEMA = [
    "CREATE TABLE {p}operations (tenant VARCHAR(128) NOT NULL, idempotency_key VARCHAR(512) NOT NULL, "
    "scope VARCHAR(512) NOT NULL, attempt INTEGER NOT NULL, op_type VARCHAR(128) NOT NULL, "
    "request_hash VARCHAR(64) NOT NULL, status VARCHAR(32) NOT NULL, result TEXT, error TEXT, "
    "version INTEGER NOT NULL, created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL, "
    "PRIMARY KEY (tenant, idempotency_key))",
    "CREATE TABLE {p}outbox (event_id VARCHAR(36) PRIMARY KEY, seq INTEGER NOT NULL, tenant VARCHAR(128) NOT NULL, "
    "idempotency_key VARCHAR(512) NOT NULL, event_type VARCHAR(64) NOT NULL, payload TEXT NOT NULL, "
    "created_at FLOAT NOT NULL, published_at FLOAT, attempts INTEGER NOT NULL, last_error TEXT)",
    "CREATE TABLE {p}consumed (consumer VARCHAR(128) NOT NULL, event_id VARCHAR(36) NOT NULL, "
    "consumed_at FLOAT NOT NULL, PRIMARY KEY (consumer, event_id))",
    "INSERT INTO {p}operations VALUES ('default', 'old-call:issue_refund:k1', 'old-call:issue_refund:h', 1, "
    "'issue_refund', 'h', 'outcome_unknown', NULL, 'no reply within 10s', 2, 1.0, 1.0)",
    "INSERT INTO {p}outbox VALUES ('e1', 2, 'default', 'old-call:issue_refund:k1', 'operation.outcome_unknown', "
    "'{{}}', 1.0, NULL, 0, NULL)",
]


async def _old_database(url: str, prefix: str) -> None:
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        for statement in _OLD_SCHEMA:
            await conn.execute(text(statement.format(p=prefix)))
    await engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def old_url(request, tmp_path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/old.db" if request.param == "sqlite" else postgres_url()


async def test_an_old_schema_database_is_migrated_in_place(old_url: str):
    prefix = unique_prefix()
    await _old_database(old_url, prefix)
    ledger = OperationLedger(old_url, table_prefix=prefix)
    try:
        await ledger.create_tables()
        # The record from before the upgrade is still there, with defaults in the new columns.
        old = await ledger.get("default", "old-call:issue_refund:k1")
        assert old is not None and old.status == S.OUTCOME_UNKNOWN
        assert (old.owner, old.lease_until, old.resource) == ("", 0.0, "")

        # ...and is reconciled like any other: the new columns are written.
        async def applied(_record):
            return Reconciliation(S.SUCCEEDED, result={"refund_id": 7})

        assert (await ledger.reconcile(old, applied)).status == S.SUCCEEDED

        async def refund(arguments):
            return {"status": "refunded"}

        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="new-call", resources={
            "issue_refund": lambda args: f"order {args['order_id']}"})
        result = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, refund)
        assert result.executed
        record = await ledger.get("default", result.idempotency_key or "")
        assert record is not None and record.resource == "new-call:order #W1" and record.owner

        async with ledger.engine.connect() as conn:
            version = (await conn.execute(text(f"SELECT version FROM {prefix}schema"))).scalar()
            indexes = await conn.run_sync(lambda sync: {i["name"] for i in inspect(sync).get_indexes(
                f"{prefix}operations")})
        assert version == SCHEMA_VERSION and f"{prefix}operations_status" in indexes

        # Opening it again (another process, a restart) changes nothing.
        again = OperationLedger(old_url, table_prefix=prefix)
        await again.create_tables()
        assert len(await again.records()) == 2
        await again.close()
    finally:
        await ledger.drop_tables()
        await ledger.close()


async def test_a_database_written_by_a_newer_version_is_refused(tmp_path):
    prefix = unique_prefix()
    url = f"sqlite+aiosqlite:///{tmp_path}/new.db"
    engine = create_async_engine(url)
    versions = schema_table(prefix)
    async with engine.begin() as conn:
        await conn.run_sync(versions.create)
        await conn.execute(versions.insert().values(component="ledger", version=SCHEMA_VERSION + 1, migrated_at=0.0))
    await engine.dispose()
    ledger = OperationLedger(url, table_prefix=prefix)
    with pytest.raises(SchemaTooNew, match="newer than this harness"):
        await ledger.create_tables()
    await ledger.close()
