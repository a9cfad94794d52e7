import contextlib
import datetime as dt
import uuid
from collections.abc import AsyncIterator

import pytest

from pipecat_harness.retrieval import EvidenceRetriever, RetrievalScope, load_documents
from pipecat_harness.retrieval.labeled import DATA_DIR
from tests.services import postgres_url

CALL_DATE = dt.date(2026, 11, 20)


def northwind(*products: str, **kwargs) -> RetrievalScope:
    return RetrievalScope("northwind", products, CALL_DATE, **kwargs)


@pytest.fixture(scope="session")
def documents():
    return load_documents(DATA_DIR / "policies.yaml")


@contextlib.asynccontextmanager
async def make_retriever(backend: str, documents, **kwargs) -> AsyncIterator[EvidenceRetriever]:
    url = "sqlite+aiosqlite://" if backend == "sqlite" else postgres_url()
    table = f"t{uuid.uuid4().hex[:10]}"
    retriever = await EvidenceRetriever.build(documents, url=url, table=table, **kwargs)
    try:
        yield retriever
    finally:
        with contextlib.suppress(Exception):
            await retriever.lexical.drop()
        await retriever.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def lexical_retriever(request, documents) -> AsyncIterator[EvidenceRetriever]:
    """Lexical-only retrieval on SQLite FTS5 and on PostgreSQL full text."""
    async with make_retriever(request.param, documents) as retriever:
        yield retriever
