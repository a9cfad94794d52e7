"""A call's retriever from a documents file, with the file's embeddings computed once per process.

Embedding a corpus costs seconds of CPU (the model's load, then every
document and sentence); a call's lexical index costs milliseconds. So the
parsed documents, their vectors and the reranker's sentence vectors are kept
per process for each documents file, keyed by its resolved path, modification
time and size: a changed file is embedded again, an unchanged one never. Each
call still gets its own lexical index (in memory by default), closed with the
call.

Without the ``retrieval`` extra (onnxruntime, tokenizers and the model
package) the retriever is lexical only, and one log line says which extra
brings embedding search back.
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
from pipecat_harness.retrieval.retriever import EvidenceRetriever

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


def _file_version(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _embedder(embeddings: bool) -> Embedder | None:
    """The default embedder, or ``None`` (logged once per process) when the extra is not installed."""
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
    """The documents of ``path`` with their vectors, embedded on the first call for this version of the file.

    Blocking (model load and embedding): run it off the event loop. Calls for the
    same file wait for one another rather than embed it twice.

    Args:
        path: The documents file (YAML).
        embeddings: Embed the documents (falls back to lexical only without the extra).
        rerank: Embed their sentences for the reranker too.

    Raises:
        DocumentError: The file does not hold valid documents.
    """
    resolved = Path(path).resolve()
    key = (str(resolved), embeddings, rerank)
    with _lock:
        version = _file_version(resolved)
        cached = _prepared.get(key)
        if cached is not None and cached.version == version:
            return cached
        documents = load_documents(resolved)
        embedder = _embedder(embeddings)
        vectors = reranker = None
        runs = 0
        if embedder is not None:
            vectors = VectorIndex(embedder)
            vectors.add(documents)
            runs += 1
            if rerank:
                reranker = SentenceReranker(embedder)
                reranker.add(documents)
                runs += 1
        prepared = PreparedCorpus(str(resolved), version, documents, vectors, reranker, runs)
        _prepared[key] = prepared
        return prepared


def clear_prepared() -> None:
    """Forget every prepared corpus (the next call embeds its file again)."""
    with _lock:
        _prepared.clear()


async def build_file_retriever(
    path: str | Path,
    *,
    url: str = "sqlite+aiosqlite://",
    embeddings: bool = True,
    rerank: bool = True,
    table: str = "harness_policy",
    **kwargs: Any,
) -> EvidenceRetriever:
    """A retriever over the documents of ``path``: the prepared corpus (off the loop) plus this call's lexical index.

    Args:
        path: The documents file.
        url: Database of the call's lexical index.
        embeddings: Add embedding search (lexical only when the extra is missing).
        rerank: Add the sentence reranker with embedding search.
        table: Table name prefix of the lexical index.
        **kwargs: :class:`EvidenceRetriever`'s ``limit``, ``candidates`` and ``min_similarity``.
    """
    prepared = await asyncio.to_thread(prepare_corpus, path, embeddings=embeddings, rerank=rerank)
    return await EvidenceRetriever.build(prepared.documents, url=url, embedder=None, table=table,
                                         vectors=prepared.vectors, reranker=prepared.reranker, **kwargs)
