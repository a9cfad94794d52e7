"""Lexical search with the scope inside the SQL ``WHERE`` clause: SQLite FTS5 embedded, PostgreSQL shared.

A document outside the scope is never a candidate, however well its words match.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.scope import RetrievalScope
from pipecat_harness.retrieval.terms import query_terms

__all__ = ["LexicalIndex", "PostgresLexicalIndex", "SqliteLexicalIndex", "lexical_index"]

_FILTER = ("d.tenant = :tenant AND d.product IN :products AND d.language = :language"
           " AND d.effective_from <= :day AND (d.effective_to IS NULL OR d.effective_to >= :day)")
_DOCS = ("CREATE TABLE IF NOT EXISTS {table}_docs (doc_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, product TEXT NOT NULL"
         ", language TEXT NOT NULL, revision TEXT NOT NULL, effective_from {date} NOT NULL, effective_to {date}{more})")
_PG_UPSERT = ("INSERT INTO {table}_docs VALUES (:id, :tenant, :product, :language, :revision, :start, :end,"
              " setweight(to_tsvector(CAST(:config AS regconfig), :title), 'A')"
              " || to_tsvector(CAST(:config AS regconfig), :body))"
              " ON CONFLICT (doc_id) DO UPDATE SET tenant = EXCLUDED.tenant, product = EXCLUDED.product,"
              " language = EXCLUDED.language, revision = EXCLUDED.revision, effective_from = EXCLUDED.effective_from,"
              " effective_to = EXCLUDED.effective_to, tsv = EXCLUDED.tsv")


class LexicalIndex(abc.ABC):
    """A full-text index of policy documents searched within a scope."""

    _suffixes: tuple[str, ...] = ("_docs",)

    def __init__(self, engine: AsyncEngine, table: str) -> None:
        if not table.replace("_", "").isalnum():
            raise ValueError(f"table name {table!r} must be letters, digits and underscores")
        self.engine = engine
        self.table = table

    @abc.abstractmethod
    async def create(self) -> None:
        """Create the tables if they do not exist."""

    @abc.abstractmethod
    async def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Index ``documents`` (replacing any with the same ``doc_id``)."""

    async def search(self, query: str, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """Ids and scores (higher is better) of in-scope documents matching any word of ``query``."""
        terms = query_terms(query)
        return await self._search(terms, scope, limit) if terms else []

    @abc.abstractmethod
    async def _search(self, terms: list[str], scope: RetrievalScope, limit: int) -> list[tuple[str, float]]:
        """The in-scope matches of ``terms`` (one at least), best first."""

    async def drop(self) -> None:
        """Remove the index's tables."""
        async with self.engine.begin() as conn:
            for suffix in self._suffixes:
                await conn.execute(text(f"DROP TABLE IF EXISTS {self.table}{suffix}"))

    async def close(self) -> None:
        """Dispose of the engine's connections."""
        await self.engine.dispose()

    async def _rows(self, sql: str, scope: RetrievalScope, limit: int, **params: object) -> list[tuple[str, float]]:
        scoped = {"tenant": scope.tenant, "products": list(scope.products), "language": scope.language, "limit": limit}
        query = text(sql).bindparams(bindparam("products", expanding=True))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query, {**scoped, "day": scope.call_date, **params})).all()
        return [(str(doc_id), float(rank)) for doc_id, rank in rows]


class SqliteLexicalIndex(LexicalIndex):
    """FTS5 index with BM25 ranking (Porter stemming), in memory or in a file.

    Each row carries a scope token (a digest of tenant, product and language) in an indexed column, and a search
    matches the scope's tokens *and* the question's words, so FTS5 ranks only the caller's tenant and products.
    ``url`` is ``sqlite+aiosqlite://`` (in memory) or ``sqlite+aiosqlite:///path.db``.
    """

    _suffixes = ("_fts", "_docs")

    def __init__(self, url: str = "sqlite+aiosqlite://", *, table: str = "harness_policy") -> None:
        if url.rstrip("/") in ("sqlite+aiosqlite:", "sqlite+aiosqlite:/"):
            engine = create_async_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
        else:
            engine = create_async_engine(url, connect_args={"timeout": 30})
        super().__init__(engine, table)

    async def create(self) -> None:
        """Create the metadata table and the FTS5 table."""
        async with self.engine.begin() as conn:
            await conn.execute(text(_DOCS.format(table=self.table, date="TEXT", more="")))
            columns = [row[1] for row in (await conn.execute(text(f"PRAGMA table_info({self.table}_fts)"))).all()]
            if columns and "scope" not in columns:  # an index written before scope tokens: rebuilt from scratch
                await conn.execute(text(f"DROP TABLE {self.table}_fts"))
                await conn.execute(text(f"DELETE FROM {self.table}_docs"))
            fts = "doc_id UNINDEXED, scope, title, body, tokenize='porter unicode61'"
            await conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.table}_fts USING fts5({fts})"))

    async def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Index ``documents``."""
        rows = [_row(doc, iso=True, scope=_scope_token(doc.tenant, doc.product, doc.language)) for doc in documents]
        if not rows:
            return
        async with self.engine.begin() as conn:
            lookup = text(f"SELECT doc_id FROM {self.table}_docs WHERE doc_id IN :ids")
            lookup = lookup.bindparams(bindparam("ids", expanding=True))
            ids = [row["id"] for row in rows]
            existing = [doc_id for start in range(0, len(ids), 500)  # SQLite caps the parameters of one statement
                        for doc_id in (await conn.execute(lookup, {"ids": ids[start : start + 500]})).scalars()]
            for doc_id in existing:  # replaced documents only: doc_id is not an FTS-indexed column
                await conn.execute(text(f"DELETE FROM {self.table}_fts WHERE doc_id = :id"), {"id": doc_id})
            values = "(:id, :tenant, :product, :language, :revision, :start, :end)"
            await conn.execute(text(f"INSERT OR REPLACE INTO {self.table}_docs VALUES {values}"), rows)
            fts = f"INSERT INTO {self.table}_fts (doc_id, scope, title, body) VALUES (:id, :scope, :title, :body)"
            await conn.execute(text(fts), rows)

    async def _search(self, terms: list[str], scope: RetrievalScope, limit: int) -> list[tuple[str, float]]:
        """BM25-ranked."""
        scopes = " OR ".join(_scope_token(scope.tenant, product, scope.language) for product in scope.products)
        words = " OR ".join(f'"{t}"' for t in terms)
        statement = (f"SELECT f.doc_id, bm25({self.table}_fts, 0.0, 0.0, 2.0, 1.0) AS rank FROM {self.table}_fts f"
                     f" JOIN {self.table}_docs d ON d.doc_id = f.doc_id"
                     f" WHERE {self.table}_fts MATCH :match AND {_FILTER} ORDER BY rank LIMIT :limit")
        match = f"scope : ({scopes}) AND {{title body}} : ({words})"
        rows = await self._rows(statement, scope, limit, day=scope.call_date.isoformat(), match=match)
        return [(doc_id, -rank) for doc_id, rank in rows]  # bm25() is lower-is-better; every index reports higher


class PostgresLexicalIndex(LexicalIndex):
    """PostgreSQL full-text index (``tsvector``, GIN, ``ts_rank_cd``) at a ``postgresql+asyncpg://`` URL, shared."""

    def __init__(self, url: str, *, table: str = "harness_policy") -> None:
        super().__init__(create_async_engine(url, pool_recycle=1800), table)

    async def create(self) -> None:
        """Create the table and its GIN index."""
        table = self.table
        async with self.engine.begin() as conn:
            await conn.execute(text(_DOCS.format(table=table, date="DATE", more=", tsv TSVECTOR NOT NULL")))
            await conn.execute(text(f"CREATE INDEX IF NOT EXISTS {table}_tsv ON {table}_docs USING GIN (tsv)"))
            scope = "(tenant, product, language)"
            await conn.execute(text(f"CREATE INDEX IF NOT EXISTS {table}_scope ON {table}_docs {scope}"))

    async def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Index ``documents`` (title weighted above body)."""
        async with self.engine.begin() as conn:
            for doc in documents:
                row = _row(doc, iso=False, config=_ts_config(doc.language))
                await conn.execute(text(_PG_UPSERT.format(table=self.table)), row)

    async def _search(self, terms: list[str], scope: RetrievalScope, limit: int) -> list[tuple[str, float]]:
        """``ts_rank_cd``-ranked."""
        statement = ("SELECT d.doc_id, ts_rank_cd(d.tsv, q) AS rank FROM"
                     f" {self.table}_docs d, to_tsquery(CAST(:config AS regconfig), :query) q"
                     f" WHERE d.tsv @@ q AND {_FILTER} ORDER BY rank DESC, d.doc_id LIMIT :limit")
        # Terms are letters and digits only (query_terms), so they are safe tsquery lexemes.
        return await self._rows(statement, scope, limit, config=_ts_config(scope.language), query=" | ".join(terms))


def _row(doc: PolicyDocument, *, iso: bool, **more: object) -> dict[str, object]:
    start, end = doc.effective_from, doc.effective_to
    dates = {"start": start.isoformat(), "end": end and end.isoformat()} if iso else {"start": start, "end": end}
    row = {"id": doc.doc_id, "tenant": doc.tenant, "product": doc.product, "language": doc.language}
    return {**row, "revision": doc.revision, **dates, "title": doc.title, "body": doc.text, **more}


def _scope_token(tenant: str, product: str, language: str) -> str:
    """A word naming one tenant/product/language cell (letters and digits only, so FTS5 keeps it whole)."""
    return "s" + hashlib.sha256(f"{tenant}\x1f{product}\x1f{language}".encode()).hexdigest()[:20]


def _ts_config(language: str) -> str:
    return {"en": "english", "de": "german", "fr": "french", "es": "spanish"}.get(language, "simple")


def lexical_index(url: str = "sqlite+aiosqlite://", *, table: str = "harness_policy") -> LexicalIndex:
    """The lexical index for a SQLite or PostgreSQL URL (``ValueError`` for any other)."""
    if url.startswith("sqlite"):
        return SqliteLexicalIndex(url, table=table)
    if url.startswith("postgresql"):
        return PostgresLexicalIndex(url, table=table)
    raise ValueError(f"retrieval database URL {url!r} must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
