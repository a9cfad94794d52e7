"""Optional reranking: score candidates by their best-matching sentence.

A whole-document vector blurs a long policy; the sentence that answers the
question is a sharper signal. Sentence vectors are computed at indexing time,
so reranking costs one matrix product per candidate. Whether it is worth its
latency is measured by ``scripts/bench_retrieval.py``; the retriever runs
without it unless asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.embedding import Embedder

__all__ = ["SentenceReranker"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class SentenceReranker:
    """Reranks by the maximum cosine similarity between the query and a candidate's sentences.

    Args:
        embedder: The embedding model (the same as the vector index's).
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._sentences: dict[str, np.ndarray] = {}

    def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Embed the sentences of ``documents`` (each distinct sentence once, in one batch)."""
        rows: dict[str, int] = {}
        spans: list[tuple[str, list[int]]] = []
        for doc in documents:
            sentences = [s for s in _SENTENCE.split(doc.text) if s.strip()]
            if doc.title:
                sentences.append(doc.title)
            spans.append((doc.doc_id, [rows.setdefault(s, len(rows)) for s in sentences]))
        if not rows:
            return
        vectors = self.embedder.embed(list(rows))  # one batch: far cheaper than one call per document
        for doc_id, indices in spans:
            self._sentences[doc_id] = vectors[indices]

    def rerank(self, query_vector: np.ndarray, candidates: Sequence[str]) -> list[tuple[str, float]]:
        """``candidates`` reordered best first with their sentence scores."""
        scored = []
        for doc_id in candidates:
            matrix = self._sentences.get(doc_id)
            score = float(np.max(matrix @ query_vector)) if matrix is not None and len(matrix) else -1.0
            scored.append((doc_id, score))
        return sorted(scored, key=lambda pair: (-pair[1], pair[0]))
