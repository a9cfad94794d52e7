"""``EvidenceRetriever``: committed question → scope filters → lexical + embedding search → fusion → evidence.

Stages are timed against the design's budget (20/50/60/20 ms); an empty scope is ``no_eligible_evidence``, never a
wider search.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from pipecat_harness.retrieval.cache import EvidenceCache, cache_key
from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.eligibility import EligibilityIndex
from pipecat_harness.retrieval.embedding import Embedder, VectorIndex, load_default_embedder
from pipecat_harness.retrieval.evidence import Evidence, EvidenceItem, StageTimings
from pipecat_harness.retrieval.lexical import LexicalIndex, lexical_index
from pipecat_harness.retrieval.rerank import SentenceReranker
from pipecat_harness.retrieval.scope import RetrievalScope

__all__ = ["EvidenceRetriever", "embed_documents", "reciprocal_rank_fusion"]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[tuple[str, float]]], *, k: float = 60.0,
                           weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse best-first ``(doc_id, score)`` rankings by ``sum(weight / (k + rank))`` (default weights 1), ties by id."""
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, (doc_id, _score) in enumerate(ranking, start=1):
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def embed_documents(embedder: Embedder, documents: Sequence[PolicyDocument],
                    rerank: bool) -> tuple[VectorIndex, SentenceReranker | None]:
    """``documents`` embedded by ``embedder`` (blocking), with their sentences too when ``rerank``."""
    vectors = VectorIndex(embedder)
    vectors.add(documents)
    reranker = SentenceReranker(embedder) if rerank else None
    if reranker is not None:
        reranker.add(documents)
    return vectors, reranker


class EvidenceRetriever:
    """Retrieves policy evidence for one scope.

    Args:
        documents: Every document the indexes hold (the filters pick the eligible ones).
        lexical: The full-text index.
        vectors: The embedding index (``None``: lexical only).
        cache: Evidence cache (``None``: no caching).
        reranker: Sentence reranker (``None``: fused order is final).
        limit: Evidence items returned.
        candidates: Candidates each search contributes to fusion.
        min_similarity: Embedding hits below this cosine similarity are not evidence on their own.
    """

    def __init__(self, documents: Sequence[PolicyDocument], lexical: LexicalIndex, *,
                 vectors: VectorIndex | None = None, cache: EvidenceCache | None = None,
                 reranker: SentenceReranker | None = None, limit: int = 5, candidates: int = 20,
                 min_similarity: float = 0.3) -> None:
        self.eligibility = EligibilityIndex(documents)
        self.lexical = lexical
        self.vectors = vectors
        self.cache = cache
        self.reranker = reranker
        self.limit = limit
        self.candidates = candidates
        self.min_similarity = min_similarity

    @classmethod
    async def build(cls, documents: Sequence[PolicyDocument], *, url: str = "sqlite+aiosqlite://",
                    embedder: Embedder | Literal["default"] | None = "default", cache: EvidenceCache | None = None,
                    rerank: bool = True, table: str = "harness_policy", vectors: VectorIndex | None = None,
                    reranker: SentenceReranker | None = None, **kwargs: Any) -> EvidenceRetriever:
        """Create and fill the indexes for ``documents`` (``kwargs``: ``limit``, ``candidates``, ``min_similarity``).

        ``url`` is the lexical index's database (SQLite FTS5 or PostgreSQL), ``table`` its table name prefix, ``cache``
        the evidence cache. ``embedder`` is ``"default"`` (:func:`load_default_embedder`), your own, or ``None`` for
        lexical only; with one, ``rerank`` adds the sentence reranker (it lifts recall@1 for about 0.1 ms a query).
        ``vectors`` and ``reranker`` are ``documents`` and their sentences already embedded (shared, read-only; no
        ``embedder`` is used then).
        """
        lexical = lexical_index(url, table=table)
        try:
            await lexical.create()
            await lexical.add(documents)
            if vectors is None and embedder == "default":
                embedder = await asyncio.to_thread(load_default_embedder)
            if vectors is None and embedder is not None and not isinstance(embedder, str):
                vectors, reranker = await asyncio.to_thread(embed_documents, embedder, documents, rerank)
        except BaseException:  # a failed or cancelled build leaves no open connection behind
            await asyncio.shield(lexical.close())
            raise
        return cls(documents, lexical, vectors=vectors, cache=cache, reranker=reranker, **kwargs)

    @property
    def documents(self) -> list[PolicyDocument]:
        """Every indexed document."""
        return self.eligibility.documents

    def document(self, doc_id: str) -> PolicyDocument | None:
        """The indexed document ``doc_id``."""
        return self.eligibility.document(doc_id)

    async def retrieve(self, query: str, scope: RetrievalScope) -> Evidence:
        """Evidence for ``query`` within ``scope``, or ``no_eligible_evidence``."""
        timings = StageTimings()
        start = time.perf_counter()
        eligible = self.eligibility.eligible(scope)
        eligible_ids, scope_revision = eligible.ids, eligible.revision
        key = cache_key(scope, scope_revision, query)
        timings.filter_ms = _ms(start)
        if not eligible_ids:
            return Evidence("no_eligible_evidence", [], query, scope_revision, timings=timings)

        if self.cache is not None:
            start = time.perf_counter()
            cached = await self.cache.get(key)
            if cached is not None:
                # A hit saves the search; it does not vouch for the items.
                items = [item for item in cached if item.doc_id in eligible_ids]
                timings.assembly_ms = _ms(start)
                if items:
                    return Evidence("evidence", items, query, scope_revision, cache_hit=True, timings=timings)

        start = time.perf_counter()
        ranked, query_vector = await self._search(query, scope, eligible_ids, timings)
        timings.search_ms = _ms(start)

        if self.reranker is not None and query_vector is not None and ranked:
            start = time.perf_counter()
            ranked = self.reranker.rerank(query_vector, [doc_id for doc_id, _ in ranked[: self.candidates]])
            timings.rerank_ms = _ms(start)

        start = time.perf_counter()
        # The lexical index filters by scope; superseded revisions are dropped here.
        items = [EvidenceItem.from_document(doc, score) for doc_id, score in ranked
                 if doc_id in eligible_ids and (doc := self.eligibility.document(doc_id)) is not None][: self.limit]
        if self.cache is not None and items:
            await self.cache.put(key, items)
        timings.assembly_ms += _ms(start)
        return Evidence("evidence" if items else "no_eligible_evidence", items, query, scope_revision, timings=timings)

    async def _search(self, query: str, scope: RetrievalScope, eligible: frozenset[str],
                      timings: StageTimings) -> tuple[list[tuple[str, float]], np.ndarray | None]:
        lexical_task = self.lexical.search(query, scope, limit=self.candidates)
        if self.vectors is None:
            return [hit for hit in await lexical_task if hit[0] in eligible], None
        vector_index = self.vectors

        def embed() -> np.ndarray:
            start = time.perf_counter()
            vector = vector_index.embed_query(query)
            timings.embed_ms = _ms(start)
            return vector

        query_vector, lexical_hits = await asyncio.gather(asyncio.to_thread(embed), lexical_task)
        lexical = [hit for hit in lexical_hits if hit[0] in eligible]
        hits = vector_index.search_vector(query_vector, scope, limit=self.candidates, eligible=eligible)
        semantic = [hit for hit in hits if hit[1] >= self.min_similarity]
        ranked = reciprocal_rank_fusion([lexical, semantic]) if lexical and semantic else lexical or semantic
        return ranked, query_vector

    async def close(self) -> None:
        """Release the lexical index's connections."""
        await self.lexical.close()
