"""Lexical search with the scope applied inside the query: SQLite FTS5 embedded, PostgreSQL full-text shared.

Exact identifiers and policy words favour lexical matching. Both indexes put
the tenant, product, language and effective-date filters in the SQL ``WHERE``
clause, so a document outside the scope is never a candidate, however well
its words match.
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

_FILTER = (
    "d.tenant = :tenant AND d.product IN :products AND d.language = :language"
    " AND d.effective_from <= :day AND (d.effective_to IS NULL OR d.effective_to >= :day)"
)


class LexicalIndex(abc.ABC):
    """A full-text index of policy documents searched within a scope."""

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

    @abc.abstractmethod
    async def search(self, query: str, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """Ids and scores (higher is better) of in-scope documents matching ``query``."""

    async def drop(self) -> None:
        """Remove the index's tables."""
        async with self.engine.begin() as conn:
            for suffix in self._suffixes:
                await conn.execute(text(f"DROP TABLE IF EXISTS {self.table}{suffix}"))

    _suffixes: tuple[str, ...] = ("_docs",)

    async def close(self) -> None:
        """Dispose of the engine's connections."""
        await self.engine.dispose()

    def _params(self, scope: RetrievalScope, limit: int) -> dict[str, object]:
        return {
            "tenant": scope.tenant,
            "products": list(scope.products),
            "language": scope.language,
            "day": scope.call_date,
            "limit": limit,
        }


class SqliteLexicalIndex(LexicalIndex):
    """FTS5 index with BM25 ranking (Porter stemming), in memory or in a file.

    Each row carries a scope token (a digest of its tenant, product and
    language) in an indexed column, and a search matches the scope's tokens
    *and* the question's words, so FTS5 ranks only the documents of the
    caller's tenant and products, however many other documents the index holds.

    Args:
        url: ``sqlite+aiosqlite://`` (in memory, the default) or ``sqlite+aiosqlite:///path.db``.
        table: Name prefix of the index tables.
    """

    def __init__(self, url: str = "sqlite+aiosqlite://", *, table: str = "harness_policy") -> None:
        if url.rstrip("/") in ("sqlite+aiosqlite:", "sqlite+aiosqlite:/"):
            engine = create_async_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
        else:
            engine = create_async_engine(url, connect_args={"timeout": 30})
        super().__init__(engine, table)

    _suffixes = ("_fts", "_docs")

    async def create(self) -> None:
        """Create the metadata table and the FTS5 table."""
        async with self.engine.begin() as conn:
            await conn.execute(text(
                f"CREATE TABLE IF NOT EXISTS {self.table}_docs (doc_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
                " product TEXT NOT NULL, language TEXT NOT NULL, revision TEXT NOT NULL,"
                " effective_from TEXT NOT NULL, effective_to TEXT)"
            ))
            columns = [row[1] for row in (await conn.execute(text(f"PRAGMA table_info({self.table}_fts)"))).all()]
            if columns and "scope" not in columns:  # an index written before scope tokens: rebuilt from scratch
                await conn.execute(text(f"DROP TABLE {self.table}_fts"))
                await conn.execute(text(f"DELETE FROM {self.table}_docs"))
            await conn.execute(text(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.table}_fts USING fts5("
                "doc_id UNINDEXED, scope, title, body, tokenize='porter unicode61')"
            ))

    async def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Index ``documents``."""
        rows = [
            {
                "id": doc.doc_id, "tenant": doc.tenant, "product": doc.product, "language": doc.language,
                "revision": doc.revision, "start": doc.effective_from.isoformat(),
                "end": doc.effective_to.isoformat() if doc.effective_to else None,
                "title": doc.title, "body": doc.text, "scope": _scope_token(doc.tenant, doc.product, doc.language),
            }
            for doc in documents
        ]
        if not rows:
            return
        async with self.engine.begin() as conn:
            lookup = text(f"SELECT doc_id FROM {self.table}_docs WHERE doc_id IN :ids").bindparams(
                bindparam("ids", expanding=True))
            ids = [row["id"] for row in rows]
            existing = [
                doc_id for start in range(0, len(ids), 500)  # SQLite caps the parameters of one statement
                for doc_id in (await conn.execute(lookup, {"ids": ids[start : start + 500]})).scalars()
            ]
            for doc_id in existing:  # replaced documents only: doc_id is not an FTS-indexed column
                await conn.execute(text(f"DELETE FROM {self.table}_fts WHERE doc_id = :id"), {"id": doc_id})
            await conn.execute(
                text(
                    f"INSERT OR REPLACE INTO {self.table}_docs VALUES"
                    " (:id, :tenant, :product, :language, :revision, :start, :end)"
                ),
                rows,
            )
            await conn.execute(
                text(f"INSERT INTO {self.table}_fts (doc_id, scope, title, body) VALUES (:id, :scope, :title, :body)"),
                rows,
            )

    async def search(self, query: str, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """BM25-ranked in-scope matches (any query term)."""
        terms = query_terms(query)
        if not terms:
            return []
        scopes = " OR ".join(_scope_token(scope.tenant, product, scope.language) for product in scope.products)
        words = " OR ".join(f'"{t}"' for t in terms)
        match = f"scope : ({scopes}) AND {{title body}} : ({words})"
        statement = text(
            f"SELECT f.doc_id, bm25({self.table}_fts, 0.0, 0.0, 2.0, 1.0) AS rank FROM {self.table}_fts f"
            f" JOIN {self.table}_docs d ON d.doc_id = f.doc_id"
            f" WHERE {self.table}_fts MATCH :match AND {_FILTER} ORDER BY rank LIMIT :limit"
        ).bindparams(bindparam("products", expanding=True))
        params = self._params(scope, limit)
        params["day"] = scope.call_date.isoformat()
        params["match"] = match
        async with self.engine.connect() as conn:
            rows = (await conn.execute(statement, params)).all()
        # bm25() is lower-is-better; negate so every index reports higher-is-better.
        return [(str(doc_id), -float(rank)) for doc_id, rank in rows]


class PostgresLexicalIndex(LexicalIndex):
    """PostgreSQL full-text index (``tsvector`` with a GIN index, ``ts_rank_cd`` ranking) shared by workers.

    Args:
        url: ``postgresql+asyncpg://...``.
        table: Name prefix of the index table.
    """

    def __init__(self, url: str, *, table: str = "harness_policy") -> None:
        super().__init__(create_async_engine(url, pool_recycle=1800), table)

    async def create(self) -> None:
        """Create the table and its GIN index."""
        async with self.engine.begin() as conn:
            await conn.execute(text(
                f"CREATE TABLE IF NOT EXISTS {self.table}_docs (doc_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
                " product TEXT NOT NULL, language TEXT NOT NULL, revision TEXT NOT NULL,"
                " effective_from DATE NOT NULL, effective_to DATE, tsv TSVECTOR NOT NULL)"
            ))
            await conn.execute(text(
                f"CREATE INDEX IF NOT EXISTS {self.table}_tsv ON {self.table}_docs USING GIN (tsv)"
            ))
            await conn.execute(text(
                f"CREATE INDEX IF NOT EXISTS {self.table}_scope ON {self.table}_docs (tenant, product, language)"
            ))

    async def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Index ``documents`` (title weighted above body)."""
        async with self.engine.begin() as conn:
            for doc in documents:
                await conn.execute(
                    text(
                        f"INSERT INTO {self.table}_docs VALUES (:id, :tenant, :product, :language, :revision,"
                        " :start, :end, setweight(to_tsvector(CAST(:config AS regconfig), :title), 'A')"
                        " || to_tsvector(CAST(:config AS regconfig), :body))"
                        " ON CONFLICT (doc_id) DO UPDATE SET tenant = EXCLUDED.tenant, product = EXCLUDED.product,"
                        " language = EXCLUDED.language, revision = EXCLUDED.revision,"
                        " effective_from = EXCLUDED.effective_from, effective_to = EXCLUDED.effective_to,"
                        " tsv = EXCLUDED.tsv"
                    ),
                    {
                        "id": doc.doc_id, "tenant": doc.tenant, "product": doc.product, "language": doc.language,
                        "revision": doc.revision, "start": doc.effective_from, "end": doc.effective_to,
                        "config": _ts_config(doc.language), "title": doc.title, "body": doc.text,
                    },
                )

    async def search(self, query: str, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """``ts_rank_cd``-ranked in-scope matches (any query term)."""
        terms = query_terms(query)
        if not terms:
            return []
        statement = text(
            "SELECT d.doc_id, ts_rank_cd(d.tsv, q) AS rank FROM"
            f" {self.table}_docs d, to_tsquery(CAST(:config AS regconfig), :query) q"
            f" WHERE d.tsv @@ q AND {_FILTER} ORDER BY rank DESC, d.doc_id LIMIT :limit"
        ).bindparams(bindparam("products", expanding=True))
        params = self._params(scope, limit)
        params["config"] = _ts_config(scope.language)
        # Terms are letters and digits only (query_terms), so they are safe tsquery lexemes.
        params["query"] = " | ".join(terms)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(statement, params)).all()
        return [(str(doc_id), float(rank)) for doc_id, rank in rows]


def _scope_token(tenant: str, product: str, language: str) -> str:
    """A word naming one tenant/product/language cell (letters and digits only, so FTS5 keeps it whole)."""
    return "s" + hashlib.sha256(f"{tenant}\x1f{product}\x1f{language}".encode()).hexdigest()[:20]


def _ts_config(language: str) -> str:
    return {"en": "english", "de": "german", "fr": "french", "es": "spanish"}.get(language, "simple")


def lexical_index(url: str = "sqlite+aiosqlite://", *, table: str = "harness_policy") -> LexicalIndex:
    """The lexical index for a database URL (SQLite or PostgreSQL).

    Raises:
        ValueError: The URL is neither SQLite nor PostgreSQL.
    """
    if url.startswith("sqlite"):
        return SqliteLexicalIndex(url, table=table)
    if url.startswith("postgresql"):
        return PostgresLexicalIndex(url, table=table)
    raise ValueError(f"retrieval database URL {url!r} must start with sqlite+aiosqlite:// or postgresql+asyncpg://")


