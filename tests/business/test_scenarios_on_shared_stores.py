"""The confirmation scenarios hold with their ledger, proposals and call state in SQLite, PostgreSQL and Redis.

Each run is a bundled business scenario with the operation ledger in a real
database and, for many workers, the call state and proposals in Redis. After
the call the stores themselves are read: the booking is one succeeded
operation in the ledger, and the proposal history the caller heard is there
for the next worker.
"""

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from pipecat_harness.config import HarnessConfig
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario
from pipecat_harness.tools.engines import acquire_engine, release_engine
from tests.services import REDIS_URL, connected_redis, postgres_url

CONTROLS = ["call_state", "tool_gate"]
EXPECTED = {
    # scenario -> (succeeded schedule_callback operations, proposal statuses in order)
    "business_callback_corrected_before_execution": (1, ["superseded", "confirmed"]),
    "business_callback_confirmed": (1, ["confirmed"]),
    "business_callback_never_confirmed": (0, ["awaiting_confirmation"]),
}


def _run(name: str, tmp_path: Path, **blocks):
    scenario = load_scenario(Path(BUNDLED_DIR) / f"{name}.yaml")
    # A call id of its own: engineers and CI runs share the PostgreSQL and Redis servers.
    scenario = scenario.model_copy(update={"name": f"{name}-{uuid.uuid4().hex[:8]}"})
    config = HarnessConfig(**blocks)
    result = run_scenario(scenario, config, controls=CONTROLS, trace_dir=tmp_path)
    assert result.as_expected, [f"{c.name}: {c.detail}" for c in result.checks]
    return scenario.name


async def _ledger_rows(url: str, prefix: str, call_id: str) -> tuple[list[tuple[str, str]], dict | None]:
    shared = acquire_engine(url)
    try:
        async with shared.engine.connect() as conn:
            operations = (await conn.execute(text(
                f"SELECT op_type, status FROM {prefix}operations WHERE idempotency_key LIKE :call"),
                {"call": f"{call_id}:%"})).all()
            proposals = None
            if (await conn.execute(text("SELECT 1"))).scalar() and prefix:
                try:
                    row = (await conn.execute(text(
                        f"SELECT document FROM {prefix}proposals WHERE call_id = :c"), {"c": call_id})).first()
                    proposals = json.loads(row.document) if row is not None else None
                except Exception:  # the table exists only when proposals were kept in this database
                    proposals = None
        return [(r.op_type, r.status) for r in operations], proposals
    finally:
        await release_engine(url, shared)


async def _drop(url: str, prefix: str) -> None:
    shared = acquire_engine(url)
    try:
        async with shared.begin() as conn:
            for table in ("proposals", "consumed", "outbox", "operations"):
                await conn.execute(text(f"DROP TABLE IF EXISTS {prefix}{table}"))
    finally:
        await release_engine(url, shared)


def _statuses(document: dict) -> list[str]:
    return [p["status"] for p in document["proposals"]]


@pytest.mark.parametrize("name", ["business_callback_corrected_before_execution", "business_callback_never_confirmed"])
def test_sqlite_ledger_holds_the_operation_and_the_proposals(name, tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    call_id = _run(name, tmp_path, tool_gate={"ledger_url": url})
    operations, proposals = asyncio.run(_ledger_rows(url, "harness_", call_id))
    succeeded, statuses = EXPECTED[name]
    assert operations.count(("schedule_callback", "succeeded")) == succeeded
    assert proposals is not None and _statuses(proposals) == statuses


async def _redis_up() -> None:
    async with connected_redis(f"probe-{uuid.uuid4().hex[:6]}:"):
        pass  # skips the test, with the reason, when Redis is down


async def _take_from_redis(call_id: str) -> tuple[dict | None, dict | None]:
    from pipecat_harness.state.redis_store import RedisStateStore

    store = RedisStateStore(REDIS_URL)
    try:
        state = await store.get_json(f"call_state:{call_id}")
        proposals = await store.get_json(f"proposals:{call_id}")
        await store.delete(f"call_state:{call_id}")
        await store.delete(f"proposals:{call_id}")
        return state, proposals
    finally:
        await store.close()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_redis_holds_the_call_state_and_the_proposals_for_every_worker(name, tmp_path):
    asyncio.run(_redis_up())
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    call_id = _run(name, tmp_path, tool_gate={"ledger_url": url},
                   call_state={"store": "redis", "redis_url": REDIS_URL})
    operations, in_database = asyncio.run(_ledger_rows(url, "harness_", call_id))
    succeeded, statuses = EXPECTED[name]
    assert operations.count(("schedule_callback", "succeeded")) == succeeded
    assert in_database is None  # with store: redis the proposals live in Redis, beside the call state
    state, proposals = asyncio.run(_take_from_redis(call_id))
    assert proposals is not None and _statuses(proposals["document"]) == statuses
    assert state is not None and state["version"] > 3
    in_state = [op["status"] for op in state["operations"].values() if op.get("tool") == "schedule_callback"]
    assert in_state.count("succeeded") == succeeded


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_postgres_ledger_and_redis_state_hold_the_call(name, tmp_path):
    url = postgres_url()
    asyncio.run(_redis_up())
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    try:
        call_id = _run(name, tmp_path, tool_gate={"ledger_url": url, "ledger_table_prefix": prefix},
                       call_state={"store": "redis", "redis_url": REDIS_URL})
        operations, in_database = asyncio.run(_ledger_rows(url, prefix, call_id))
    finally:
        asyncio.run(_drop(url, prefix))
    succeeded, statuses = EXPECTED[name]
    assert operations.count(("schedule_callback", "succeeded")) == succeeded
    assert in_database is None
    state, proposals = asyncio.run(_take_from_redis(call_id))
    assert proposals is not None and _statuses(proposals["document"]) == statuses
    assert state is not None
    in_state = [op["status"] for op in state["operations"].values() if op.get("tool") == "schedule_callback"]
    assert in_state.count("succeeded") == succeeded


def test_postgres_ledger_holds_the_proposals_without_redis(tmp_path):
    url = postgres_url()
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    name = "business_callback_corrected_before_execution"
    try:
        call_id = _run(name, tmp_path, tool_gate={"ledger_url": url, "ledger_table_prefix": prefix})
        operations, proposals = asyncio.run(_ledger_rows(url, prefix, call_id))
    finally:
        asyncio.run(_drop(url, prefix))
    succeeded, statuses = EXPECTED[name]
    assert operations.count(("schedule_callback", "succeeded")) == succeeded
    assert proposals is not None and _statuses(proposals) == statuses
