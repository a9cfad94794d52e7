import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from pipecat_harness.tools.ledger import OperationLedger
from tests.services import postgres_url


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


async def postgres_ledger(prefix: str) -> OperationLedger:
    """A ledger on the local PostgreSQL server; skips visibly when it is unreachable."""
    ledger = OperationLedger(postgres_url(), table_prefix=prefix)
    await ledger.create_tables()
    return ledger


@contextlib.asynccontextmanager
async def make_ledger(backend: str, tmp_path) -> AsyncIterator[OperationLedger]:
    prefix = unique_prefix()
    if backend == "sqlite":
        ledger = OperationLedger(f"sqlite+aiosqlite:///{tmp_path}/ledger-{prefix}.db", table_prefix=prefix)
        await ledger.create_tables()
    else:
        ledger = await postgres_ledger(prefix)
    try:
        yield ledger
    finally:
        with contextlib.suppress(Exception):
            await ledger.drop_tables()
        await ledger.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def ledger(request, tmp_path) -> AsyncIterator[OperationLedger]:
    """Each test using it runs on SQLite and on PostgreSQL."""
    async with make_ledger(request.param, tmp_path) as value:
        yield value

