import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from pipecat_harness.tools.ledger import OperationLedger

POSTGRES_URLS = (
    "postgresql+asyncpg://postgres@127.0.0.1:5432/test",
    "postgresql+asyncpg://root@127.0.0.1:5432/test",
)


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


async def postgres_ledger(prefix: str) -> OperationLedger:
    """A ledger on the local PostgreSQL server; skips visibly when it is unreachable."""
    errors = []
    for url in POSTGRES_URLS:
        ledger = OperationLedger(url, table_prefix=prefix)
        try:
            await ledger.create_tables()
            return ledger
        except Exception as exc:
            errors.append(f"{url.split('//')[1].split('@')[0]}: {type(exc).__name__}: {exc}")
            await ledger.close()
    pytest.skip("PostgreSQL not reachable at 127.0.0.1:5432: " + "; ".join(errors))


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

