"""Benchmark evidence retrieval: recall on the policy corpus, and latency at 20,000 documents.

The default configuration is the harness config's (``RetrievalSettings()``:
``retrieval.embeddings`` on, so lexical + embedding + sentence rerank), built
the way a call builds it (:func:`~pipecat_harness.retrieval.prepare_corpus`).

Part 1, on ``tests/retrieval/data/corpus.yaml`` (301 policies of 7 tenants
with superseded, expired and future revisions), for the development questions
(tuned on) and the held-out questions (only measured) separately, per
configuration (lexical only = the baseline of this run; the default: lexical +
embedding + sentence rerank; the default with the question asked before, its
vector cached; fused without the rerank): recall@1 and recall@5, recall@5 on
the questions that share no content word with their document, wrong-tenant,
expired and superseded evidence (all must be 0), "no eligible evidence"
answered where it is right, p50/p95 per stage against the design's 150 ms
budget, with the question's embedding (``embed``, part of search) on its own,
and for the default also recall at the config's pre-turn ``limit`` (k=3).
Every configuration but the cached one searches cold (the question-vector
cache emptied before each question). SQLite FTS5 and, when reachable,
PostgreSQL at 127.0.0.1:5432.

Part 2, at ``--scale`` documents (the corpus plus copies of it, once spread
over other tenants, once inside the callers' own tenant under other
products): p50 of a plain SQLite FTS5 query (``MATCH`` the question's words,
``ORDER BY rank LIMIT 20``, on the same file) and p50 of the default
configuration (cold question vector, its embedding included), and their ratio.

Usage: .venv/bin/python scripts/bench_retrieval.py [--repeat N] [--scale N] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import cast

from pipecat_harness.config.call_blocks import RetrievalSettings
from pipecat_harness.retrieval import (
    EvidenceRetriever,
    PolicyDocument,
    SentenceReranker,
    VectorIndex,
    prepare_corpus,
)
from pipecat_harness.retrieval.labeled import AnswerSupportCase, RetrievalFigures, evaluate, load_answer_support
from pipecat_harness.retrieval.terms import query_terms

DATA = Path(__file__).resolve().parents[1] / "tests" / "retrieval" / "data"
POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
BUDGET_MS = {"filter": 20.0, "search": 50.0, "embed": 50.0, "rerank": 60.0, "assembly": 20.0, "total": 150.0}


def _report(label: str, figures: RetrievalFigures, at1: RetrievalFigures, baseline_ms: float | None) -> None:
    ratio = f"{figures.p50('total') / baseline_ms:5.1f}x" if baseline_ms else "  1.0x"
    print(f"  {label:<30} recall@1 {at1.recall:4.2f}  recall@5 {figures.recall:4.2f} (no shared word "
          f"{figures.no_shared_word_recall:4.2f} of {at1.no_shared_word_cases})  wrong-tenant "
          f"{figures.wrong_tenant_hits}  expired {figures.expired_hits}  superseded {figures.superseded_hits}  "
          f"no-evidence {at1.no_evidence_correct}/{at1.no_evidence_cases}  "
          f"p50 {figures.p50('total'):5.1f} ms ({ratio} lexical)")
    stages = "  ".join(
        f"{stage} {figures.p50(stage):4.1f}/{figures.p95(stage):4.1f} (≤{BUDGET_MS[stage]:.0f})"
        for stage in ("filter", "search", "embed", "rerank", "assembly", "total")
    )
    print(f"      p50/p95 ms: {stages}")
    if figures.misses:
        print(f"      not recalled@5: {', '.join(figures.misses)}")


class _Cold:
    """Searches with the question-vector cache emptied first: every question is new to the retriever."""

    def __init__(self, inner: EvidenceRetriever) -> None:
        self.inner = inner
        self.document = inner.document
        self.documents = inner.documents

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


async def recall(url: str, label: str, repeat: int, semantic: tuple[VectorIndex | None, SentenceReranker | None],
                 documents: list[PolicyDocument], *, full: bool) -> None:
    vectors, reranker = semantic
    lexical = await EvidenceRetriever.build(documents, url=url, table=f"bench_{uuid.uuid4().hex[:8]}", embedder=None)
    try:
        for name in ("dev", "test"):
            cases = load_answer_support(DATA / f"questions_{name}.yaml")
            title = "development questions (tuned on)" if name == "dev" else "held-out questions (only measured)"
            print(f"{label}, {len(documents)} documents, {title}: {len(cases)} cases, x{repeat}")
            figures, at1 = await _run(lexical, cases, repeat)
            baseline = figures.p50("total")
            _report("lexical (baseline)", figures, at1, None)
            default = EvidenceRetriever(documents, lexical.lexical, vectors=vectors, reranker=reranker)
            figures, at1 = await _run(default, cases, repeat)
            _report("default config", figures, at1, baseline)
            k = RetrievalSettings().limit
            at_k = await evaluate(cast(EvidenceRetriever, _Cold(default)), cases, k=k)
            print(f"      recall@{k} (the pre-turn default limit) {at_k.recall:4.2f}")
            if not full:
                continue
            figures, at1 = await _run(default, cases, repeat, cold=False)
            _report("default, question asked again", figures, at1, baseline)
            fused = EvidenceRetriever(documents, lexical.lexical, vectors=vectors)
            figures, at1 = await _run(fused, cases, repeat)
            _report("fused, no rerank", figures, at1, baseline)
    finally:
        await lexical.lexical.drop()
        await lexical.close()


def _grown(documents: list[PolicyDocument], size: int, *, same_tenant: bool) -> list[PolicyDocument]:
    """The corpus plus copies up to ``size`` documents: under other tenants, or other products of the same one."""
    grown, copy = list(documents), 0
    while len(grown) < size:
        copy += 1
        for doc in documents[: size - len(grown)]:
            field = "product" if same_tenant else "tenant"
            update = {"doc_id": f"{doc.doc_id}~{copy}", field: f"{getattr(doc, field)}~{copy}"}
            grown.append(doc.model_copy(update=update))
    return grown


async def scale(documents: list[PolicyDocument], size: int, repeat: int) -> None:
    cases = [c for name in ("dev", "test") for c in load_answer_support(DATA / f"questions_{name}.yaml")
             if c.supported_by]
    for same_tenant in (False, True):
        grown = _grown(documents, size, same_tenant=same_tenant)
        layout = "copies in the callers' tenants, other products" if same_tenant else "copies under other tenants"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "index.db"
            started = time.perf_counter()
            embedder = "default" if RetrievalSettings().embeddings else None
            retriever = await EvidenceRetriever.build(grown, url=f"sqlite+aiosqlite:///{path}", embedder=embedder)
            built_s = time.perf_counter() - started
            try:
                plain = _plain_fts(path, cases, repeat)
                firsts = []
                for case in cases:  # the first question of each scope finds its eligible set
                    retriever.eligibility.add([])
                    started = time.perf_counter()
                    await retriever.retrieve(case.query, case.scope)
                    firsts.append((time.perf_counter() - started) * 1000)
                figures = await evaluate(cast(EvidenceRetriever, _Cold(retriever)), cases * repeat, k=5)
            finally:
                await retriever.close()
        default_ms = figures.p50("total")
        print(f"  {len(grown)} documents ({layout}; indexed in {built_s:.0f} s): plain FTS5 p50 "
              f"{statistics.median(plain):.2f} ms; default p50 {default_ms:.1f} ms (embed {figures.p50('embed'):.1f},"
              f" p95 {figures.p95('total'):.1f}) = {default_ms / statistics.median(plain):.1f}x plain FTS5; first "
              f"question of a scope p50 {statistics.median(firsts):.1f} ms; recall@5 {figures.recall:.2f}")


def _plain_fts(path: Path, cases: list[AnswerSupportCase], repeat: int) -> list[float]:
    conn = sqlite3.connect(path)
    try:
        times = []
        for case in cases * repeat:
            match = " OR ".join(f'"{t}"' for t in query_terms(case.query))
            started = time.perf_counter()
            conn.execute("SELECT doc_id FROM harness_policy_fts WHERE harness_policy_fts MATCH ? ORDER BY rank"
                         " LIMIT 20", (match,)).fetchall()
            times.append((time.perf_counter() - started) * 1000)
        return times
    finally:
        conn.close()


async def _reachable(url: str) -> bool:
    try:
        import asyncpg

        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"), timeout=3)
        await conn.close()
    except Exception as exc:  # any failure means "not reachable here"
        print(f"PostgreSQL full text: skipped ({type(exc).__name__}: {exc})")
        return False
    return True


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="passes over the questions per configuration")
    parser.add_argument("--scale", type=int, default=20_000, help="documents in part 2 (0 to skip)")
    parser.add_argument("--postgres", default=POSTGRES_URL, help="PostgreSQL URL ('' to skip)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    settings = RetrievalSettings()
    print(f"default config: retrieval.embeddings {str(settings.embeddings).lower()}, limit {settings.limit}")
    prepared = prepare_corpus(DATA / "corpus.yaml", embeddings=settings.embeddings)
    documents, vectors, reranker = prepared.documents, prepared.vectors, prepared.reranker
    print(f"corpus: {len(documents)} documents, {len({d.tenant for d in documents})} tenants")
    await recall("sqlite+aiosqlite://", "SQLite FTS5", args.repeat, (vectors, reranker), documents, full=True)
    if args.postgres and await _reachable(args.postgres):
        await recall(args.postgres, "PostgreSQL full text", args.repeat, (vectors, reranker), documents, full=False)
    if args.scale:
        print(f"Scale, SQLite FTS5 file, default configuration, {args.repeat} passes over the questions:")
        await scale(documents, args.scale, args.repeat)
    print(f"done in {time.perf_counter() - started:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
