"""Fixtures for the grader tests: the example constraint list, audit stores on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pipecat_harness.grader.audit import AuditStore
from pipecat_harness.grader.constraints import ConstraintList
from tests.services import postgres_url

DATA = Path(__file__).resolve().parents[2] / "pipecat_harness" / "grader" / "data"


@pytest.fixture
def constraints() -> ConstraintList:
    return ConstraintList.load(DATA / "detailing.yaml")


@pytest.fixture(params=["sqlite", "postgres"])
async def audit_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AuditStore]:
    """An empty audit store on each backend, dropped afterwards."""
    if request.param == "sqlite":
        store = AuditStore(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}", table_name="grader_audit")
    else:
        store = AuditStore(postgres_url(), table_name=f"grader_audit_{uuid.uuid4().hex[:10]}")
    await store.create_tables()
    try:
        yield store
    finally:
        await store.drop_tables()
        await store.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[AuditStore]:
    store = AuditStore(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}")
    await store.create_tables()
    try:
        yield store
    finally:
        await store.close()
