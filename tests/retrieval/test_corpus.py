"""The default retriever on the 301-policy corpus: held-out questions found, filters and revisions hold."""

from pathlib import Path

import pytest

from pipecat_harness.retrieval import (
    EvidenceRetriever,
    SentenceReranker,
    VectorIndex,
    load_default_embedder,
    load_documents,
)
from pipecat_harness.retrieval.labeled import evaluate, load_answer_support

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def semantic():
    """The default configuration's embedding indexes, built once for the module."""
    documents = load_documents(DATA / "corpus.yaml")
    vectors, reranker = VectorIndex(load_default_embedder()), SentenceReranker(load_default_embedder())
    vectors.add(documents)
    reranker.add(documents)
    return documents, vectors, reranker


@pytest.fixture
async def retriever(semantic):
    documents, vectors, reranker = semantic
    lexical = await EvidenceRetriever.build(documents, embedder=None)
    yield EvidenceRetriever(documents, lexical.lexical, vectors=vectors, reranker=reranker)
    await lexical.close()


def test_corpus_has_the_traps_the_figures_are_about():
    documents = load_documents(DATA / "corpus.yaml")
    assert len(documents) >= 300 and len({d.tenant for d in documents}) >= 3
    keys = [d.policy_key for d in documents if d.effective_to is None]
    assert len(keys) - len(set(keys)) >= 20, "open-ended revisions that a newer one supersedes"
    assert any(d.effective_to is not None for d in documents)


@pytest.mark.parametrize("questions", ["questions_dev.yaml", "questions_test.yaml"])
async def test_recall_at_5_with_paraphrases_and_no_wrong_old_or_foreign_evidence(retriever, questions):
    cases = load_answer_support(DATA / questions)
    figures = await evaluate(retriever, cases, k=5)
    assert figures.wrong_tenant_hits == 0
    assert figures.expired_hits == 0
    assert figures.superseded_hits == 0
    assert figures.no_evidence_correct == figures.no_evidence_cases >= 2
    assert figures.no_shared_word_cases >= 9
    assert figures.recall >= 0.9, figures.misses
