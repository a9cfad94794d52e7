"""Benchmark evidence retrieval on the bundled policy fixtures and labeled answer-support set.

Prints, per configuration (lexical only = the baseline of this run, embedding
only, fused, fused + sentence rerank, fused with the question asked before (its
vector cached), fused with a warm evidence cache):
recall@1 and recall@5, wrong-tenant evidence (must be 0), expired-policy
evidence (must be 0), "no eligible evidence" answered where it is the right
answer, and p50/p95 latency per stage against the design's 150 ms budget
(20 ms filters, 50 ms search, 60 ms rerank, 20 ms assembly), with the
question's embedding (``embed``, part of search) shown on its own. Every
configuration but the two cached ones searches cold: the question-vector cache
is cleared before each question. Lexical search runs on SQLite FTS5 and, when
reachable, PostgreSQL at 127.0.0.1:5432.

Usage: .venv/bin/python scripts/bench_retrieval.py [--repeat N] [--no-embeddings] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import cast

from pipecat_harness.retrieval import (
    EmbeddingUnavailable,
    EvidenceCache,
    EvidenceRetriever,
    load_default_embedder,
    load_documents,
)
from pipecat_harness.retrieval.labeled import (
    DATA_DIR,
    AnswerSupportCase,
    RetrievalFigures,
    evaluate,
    load_answer_support,
)
from pipecat_harness.state.memory import MemoryStateStore

POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
BUDGET_MS = {"filter": 20.0, "search": 50.0, "embed": 50.0, "rerank": 60.0, "assembly": 20.0, "total": 150.0}


def _report(label: str, figures: RetrievalFigures, at1: RetrievalFigures, baseline_ms: float | None) -> None:
    ratio = f"{figures.p50('total') / baseline_ms:5.1f}x" if baseline_ms else "  1.0x"
    no_evidence = f"{figures.no_evidence_correct}/{figures.no_evidence_cases}"
    print(f"  {label:<28} recall@1 {at1.recall:5.2f}  recall@5 {figures.recall:5.2f}  wrong-tenant "
          f"{figures.wrong_tenant_hits}  expired {figures.expired_hits}  no-evidence {no_evidence}  "
          f"p50 total {figures.p50('total'):6.1f} ms ({ratio} lexical)")
    stages = "  ".join(
        f"{stage} {figures.p50(stage):5.1f}/{figures.p95(stage):5.1f} (≤{BUDGET_MS[stage]:.0f})"
        for stage in ("filter", "search", "embed", "rerank", "assembly", "total")
    )
    print(f"      p50/p95 ms: {stages}")
    if figures.misses:
        print(f"      not recalled@5: {', '.join(figures.misses)}")


class _Cold:
    """Searches with the question-vector cache emptied first: every question is new to the retriever."""

    def __init__(self, inner: EvidenceRetriever) -> None:
        self.inner = inner
        self.vectors = inner.vectors
        self.document = inner.document

    async def retrieve(self, query: str, scope: object) -> object:
        if self.inner.vectors is not None:
            self.inner.vectors.clear_query_cache()
        return await self.inner.retrieve(query, scope)  # type: ignore[arg-type]


async def _run(retriever: EvidenceRetriever, cases: list[AnswerSupportCase], repeat: int, *, cold: bool = True
               ) -> tuple[RetrievalFigures, RetrievalFigures]:
    await evaluate(retriever, cases[:5], k=5)  # warm-up (first queries pay one-off costs)
    searched = cast(EvidenceRetriever, _Cold(retriever)) if cold else retriever
    figures = await evaluate(searched, cases * repeat, k=5)
    at1 = await evaluate(searched, cases, k=1)
    return figures, at1


async def bench(url: str, label: str, repeat: int, embeddings: bool) -> None:
    documents = load_documents(DATA_DIR / "policies.yaml")
    cases = load_answer_support()
    table = f"bench_{uuid.uuid4().hex[:8]}"
    supported = sum(1 for c in cases if c.supported_by)
    print(f"{label}: {len(documents)} documents, {len(cases)} cases ({supported} with supporting documents), "
          f"x{repeat}")
    lexical = await EvidenceRetriever.build(documents, url=url, table=table + "_l")
    try:
        figures, at1 = await _run(lexical, cases, repeat)
        baseline = figures.p50("total")
        _report("lexical (baseline)", figures, at1, None)
        if not embeddings:
            return
        try:
            embedder = load_default_embedder()
        except EmbeddingUnavailable as exc:
            print(f"  embedding configurations skipped: {exc}")
            return
        semantic_only = await EvidenceRetriever.build(documents, url=url, table=table + "_s", embedder=embedder,
                                                      rerank=False)
        semantic_only.lexical, semantic_lexical = _NoLexical(), semantic_only.lexical
        figures, at1 = await _run(semantic_only, cases, repeat)
        _report("embedding only", figures, at1, baseline)
        await semantic_lexical.close()
        fused = await EvidenceRetriever.build(documents, url=url, table=table + "_f", embedder=embedder,
                                              rerank=False)
        figures, at1 = await _run(fused, cases, repeat)
        _report("lexical + embedding (RRF)", figures, at1, baseline)
        reranked = await EvidenceRetriever.build(documents, url=url, table=table + "_r", embedder=embedder,
                                                 rerank=True)
        figures, at1 = await _run(reranked, cases, repeat)
        _report("fused + sentence rerank", figures, at1, baseline)
        await evaluate(reranked, cases, k=5)  # every question asked once before
        figures, at1 = await _run(reranked, cases, repeat, cold=False)
        _report("same, question asked again", figures, at1, baseline)
        await reranked.close()
        fused.cache = EvidenceCache(MemoryStateStore())
        await evaluate(fused, cases, k=5)  # fill the cache
        figures, at1 = await _run(fused, cases, repeat)
        _report("fused, warm evidence cache", figures, at1, baseline)
        await fused.close()
    finally:
        await lexical.close()
        if url.startswith("postgresql"):
            await _drop(url, table)


class _NoLexical:
    """Stands in for the lexical index to measure the embedding search alone."""

    async def search(self, *_args: object, **_kwargs: object) -> list[tuple[str, float]]:
        return []

    async def close(self) -> None:
        return None


async def _drop(url: str, table: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    async with engine.begin() as conn:
        for suffix in ("_l", "_s", "_f", "_r"):
            await conn.execute(text(f"DROP TABLE IF EXISTS {table}{suffix}_docs"))
    await engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="passes over the labeled set per configuration")
    parser.add_argument("--no-embeddings", action="store_true", help="lexical only")
    parser.add_argument("--postgres", default=POSTGRES_URL, help="PostgreSQL URL ('' to skip)")
    args = parser.parse_args()
    started = time.perf_counter()
    await bench("sqlite+aiosqlite://", "SQLite FTS5", args.repeat, not args.no_embeddings)
    if args.postgres:
        try:
            import asyncpg

            conn = await asyncpg.connect(args.postgres.replace("postgresql+asyncpg", "postgresql"), timeout=3)
            await conn.close()
        except (OSError, TimeoutError, ImportError, Exception) as exc:  # any failure means "not reachable here"
            print(f"PostgreSQL full text: skipped ({type(exc).__name__}: {exc})")
        else:
            await bench(args.postgres, "PostgreSQL full text", args.repeat, not args.no_embeddings)
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    asyncio.run(main())
