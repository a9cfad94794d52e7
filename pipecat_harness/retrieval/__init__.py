"""Evidence retrieval: policy documents filtered by the authenticated scope, searched, cited, cached.

committed question → :class:`RetrievalScope` (tenant, products, call date, language, authorisation; from server
context) → lexical search (SQLite FTS5 or PostgreSQL full text) plus embedding search (all-MiniLM-L6-v2 on onnxruntime,
offline, on by default) → reciprocal rank fusion → :class:`Evidence` with source, revision and effective dates, or
``no_eligible_evidence``. Only the latest revision of a policy in effect on the call's date is eligible.
"""

from typing import Any

from pipecat_harness.retrieval.cache import EvidenceCache, cache_key
from pipecat_harness.retrieval.documents import (
    GENERAL_PRODUCT,
    DocumentError,
    PolicyDocument,
    load_documents,
    parse_documents,
)
from pipecat_harness.retrieval.eligibility import Eligibility, EligibilityIndex
from pipecat_harness.retrieval.evidence import (
    UNTRUSTED_NOTICE,
    Evidence,
    EvidenceItem,
    EvidenceSource,
    EvidenceStatus,
    StageTimings,
    looks_like_instruction,
)
from pipecat_harness.retrieval.scope import RetrievalScope, ScopeError, eligible_documents, revision_token
from pipecat_harness.retrieval.terms import query_class, query_terms

__all__ = ["GENERAL_PRODUCT", "UNTRUSTED_NOTICE", "DocumentError", "Eligibility", "EligibilityIndex", "Embedder",
           "EmbeddingUnavailable", "Evidence", "EvidenceCache", "EvidenceItem", "EvidenceRetriever", "EvidenceSource",
           "EvidenceStatus", "LexicalIndex", "MiniLMEmbedder", "PolicyDocument", "PostgresLexicalIndex",
           "PreparedCorpus", "RetrievalScope", "ScopeError", "SentenceReranker", "SqliteLexicalIndex", "StageTimings",
           "VectorIndex", "build_file_retriever", "cache_key", "clear_prepared", "eligible_documents", "lexical_index",
           "load_default_embedder", "load_documents", "looks_like_instruction", "parse_documents", "prepare_corpus",
           "query_class", "query_terms", "reciprocal_rank_fusion", "revision_token"]

#: Names from the store layer (the indexes and the retriever over them: the ``retrieval`` extra), imported when
#: first used.
_STORE_NAMES = {
    **dict.fromkeys(["Embedder", "EmbeddingUnavailable", "MiniLMEmbedder", "VectorIndex", "load_default_embedder"],
                    "embedding"),
    **dict.fromkeys(["LexicalIndex", "PostgresLexicalIndex", "SqliteLexicalIndex", "lexical_index"], "lexical"),
    **dict.fromkeys(["PreparedCorpus", "build_file_retriever", "clear_prepared", "prepare_corpus"], "prepared"),
    "SentenceReranker": "rerank",
    "EvidenceRetriever": "retriever",
    "reciprocal_rank_fusion": "retriever",
}


def __getattr__(name: str) -> Any:
    from pipecat_harness.stores import lazy_attribute

    return lazy_attribute(__name__, _STORE_NAMES, name, "retrieval")
