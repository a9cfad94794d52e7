"""Reranking by each candidate's best-matching sentence (a whole-document vector blurs a long policy)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.embedding import Embedder

__all__ = ["SentenceReranker"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class SentenceReranker:
    """Reranks by the best cosine similarity between the query and a candidate's sentences (the index's embedder)."""

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
        scored = [(doc_id, self._score(doc_id, query_vector)) for doc_id in candidates]
        return sorted(scored, key=lambda pair: (-pair[1], pair[0]))

    def _score(self, doc_id: str, query_vector: np.ndarray) -> float:
        matrix = self._sentences.get(doc_id)
        return float(np.max(matrix @ query_vector)) if matrix is not None and len(matrix) else -1.0
