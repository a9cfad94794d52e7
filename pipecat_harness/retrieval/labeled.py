"""Labeled answer-support cases and the figures retrieval is judged by (the tests and ``scripts/bench_retrieval.py``).

:func:`evaluate` counts recall@k (also on questions sharing no word with their documents), out-of-scope evidence and
stage latencies.
"""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pipecat_harness.retrieval.documents import DocumentError, PolicyDocument, validate_records
from pipecat_harness.retrieval.retriever import EvidenceRetriever
from pipecat_harness.retrieval.scope import RetrievalScope
from pipecat_harness.retrieval.terms import query_class
from pipecat_harness.validation import load_mapping_file

__all__ = ["DATA_DIR", "AnswerSupportCase", "RetrievalFigures", "evaluate", "load_answer_support", "shares_a_word"]

#: Where the bundled fixtures live (``policies.yaml``, ``answer_support.yaml``).
DATA_DIR = Path(__file__).parent / "data"
_STAGES = ("filter", "search", "embed", "rerank", "assembly", "total")


class AnswerSupportCase(BaseModel):
    """One labeled question."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    tenant: str
    products: list[str] = Field(default_factory=list)
    language: str = "en"
    query: str = Field(min_length=1)
    supported_by: list[str]
    call_date: dt.date
    note: str = ""

    @property
    def scope(self) -> RetrievalScope:
        """The scope the case's session gives."""
        return RetrievalScope(self.tenant, tuple(self.products), self.call_date, self.language)


def load_answer_support(path: str | Path = DATA_DIR / "answer_support.yaml") -> list[AnswerSupportCase]:
    """Read labeled cases (a top-level ``call_date`` applies to cases without one); ``DocumentError`` if invalid."""
    raw = load_mapping_file(path, what="answer-support set", error=DocumentError)
    cases = raw.get("cases")
    if not isinstance(cases, list):
        raise DocumentError(f"{path}: field 'cases' must be a list")
    return list(validate_records(AnswerSupportCase, cases, f"{path}: cases", call_date=raw.get("call_date")))


@dataclass
class RetrievalFigures:
    """What :func:`evaluate` measured."""

    k: int
    supported_cases: int = 0
    recalled: int = 0
    no_evidence_cases: int = 0
    no_evidence_correct: int = 0
    wrong_tenant_hits: int = 0
    expired_hits: int = 0
    superseded_hits: int = 0
    no_shared_word_cases: int = 0
    no_shared_word_recalled: int = 0
    misses: list[str] = field(default_factory=list)
    stage_ms: dict[str, list[float]] = field(default_factory=lambda: {stage: [] for stage in _STAGES})

    @property
    def recall(self) -> float:
        """Share of supported cases with a supporting document in the top k."""
        return self.recalled / self.supported_cases if self.supported_cases else 1.0

    @property
    def no_shared_word_recall(self) -> float:
        """Recall on the supported cases that share no content word with any supporting document."""
        return self.no_shared_word_recalled / self.no_shared_word_cases if self.no_shared_word_cases else 1.0

    def p50(self, stage: str) -> float:
        """Median latency of ``stage`` in milliseconds."""
        values = self.stage_ms[stage]
        return statistics.median(values) if values else 0.0

    def p95(self, stage: str) -> float:
        """95th-percentile latency of ``stage`` in milliseconds."""
        values = sorted(self.stage_ms[stage])
        return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))] if values else 0.0


async def evaluate(retriever: EvidenceRetriever, cases: list[AnswerSupportCase], *, k: int = 5) -> RetrievalFigures:
    """Run every case through ``retriever`` and count the figures (an item of another tenant is a wrong-tenant hit)."""
    figures = RetrievalFigures(k=k)
    for case in cases:
        evidence = await retriever.retrieve(case.query, case.scope)
        ids = [item.doc_id for item in evidence.items[:k]]
        for doc_id in ids:
            document = retriever.document(doc_id)
            if document is None or document.tenant != case.tenant:
                figures.wrong_tenant_hits += 1
            elif not document.in_effect(case.call_date):
                figures.expired_hits += 1
            elif _superseded(document, case.scope, retriever.documents):
                figures.superseded_hits += 1
        if case.supported_by:
            figures.supported_cases += 1
            supporting = [d for d in map(retriever.document, case.supported_by) if d is not None]
            paraphrase = not shares_a_word(case.query, supporting)
            figures.no_shared_word_cases += paraphrase
            if set(ids) & set(case.supported_by):
                figures.recalled += 1
                figures.no_shared_word_recalled += paraphrase
            elif case.id not in figures.misses:
                figures.misses.append(case.id)
        else:
            figures.no_evidence_cases += 1
            if evidence.status == "no_eligible_evidence":
                figures.no_evidence_correct += 1
        for stage in _STAGES:
            figures.stage_ms[stage].append(getattr(evidence.timings, f"{stage}_ms"))
    return figures


def shares_a_word(query: str, documents: list[PolicyDocument]) -> bool:
    """Whether ``query`` has a content word (crudely stemmed) in common with any of ``documents``."""
    words = set(query_class(query).split())
    return any(words & set(query_class(d.searchable, limit=10_000).split()) for d in documents)


def _superseded(document: PolicyDocument, scope: RetrievalScope, corpus: list[PolicyDocument]) -> bool:
    later = (d for d in corpus if d.policy_key == document.policy_key and d.effective_from > document.effective_from)
    return any(scope.admits(d) for d in later)
