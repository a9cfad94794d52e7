"""The question's vector is computed once per wording; the search stage reports the embedding's share."""

import numpy as np

from pipecat_harness.retrieval import EvidenceRetriever, VectorIndex
from tests.retrieval.conftest import northwind


class CountingEmbedder:
    """A deterministic bag-of-letters embedder that counts the texts it was asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        vectors = np.zeros((len(texts), 26), dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text.lower():
                if "a" <= char <= "z":
                    vectors[row, ord(char) - 97] += 1
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


def test_the_same_words_are_embedded_once_and_the_cache_is_bounded():
    embedder = CountingEmbedder()
    index = VectorIndex(embedder, query_cache_size=2)
    first = index.embed_query("When will I get my money back?")
    again = index.embed_query("  When will I get   my money back? ")
    assert again is first and embedder.texts == ["When will I get my money back?"] and index.query_hits == 1
    assert not first.flags.writeable  # a shared vector cannot be changed by one search for the next
    index.embed_query("second question")
    index.embed_query("third question")
    index.embed_query("When will I get my money back?")  # pushed out by the two newer ones
    assert embedder.texts.count("When will I get my money back?") == 2
    index.clear_query_cache()
    index.embed_query("third question")
    assert embedder.texts.count("third question") == 2


async def test_a_repeated_question_skips_the_embedding_and_times_it_separately(documents):
    embedder = CountingEmbedder()
    retriever = await EvidenceRetriever.build(documents, embedder=embedder, rerank=False)
    try:
        before = len(embedder.texts)
        cold = await retriever.retrieve("How long do I have to return something?", northwind())
        warm = await retriever.retrieve("How long do I have to return something?", northwind())
    finally:
        await retriever.close()
    assert len(embedder.texts) == before + 1
    assert 0 < cold.timings.embed_ms <= cold.timings.search_ms  # measured, and inside the search stage
    assert [i.doc_id for i in warm.items] == [i.doc_id for i in cold.items]
