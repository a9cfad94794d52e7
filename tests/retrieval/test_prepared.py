"""A documents file is read and embedded once per process per version; a call gets its own lexical index."""

import hashlib
import shutil

import numpy as np
import pytest
from loguru import logger

from pipecat_harness.retrieval import EmbeddingUnavailable, build_file_retriever, clear_prepared, prepared
from pipecat_harness.retrieval.labeled import DATA_DIR

from .conftest import northwind


class _CountingEmbedder:
    """Deterministic word-hash vectors; counts how many texts it embedded."""

    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.sha1(word.encode()).hexdigest(), 16) % 64] += 1.0
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-9, None)


@pytest.fixture
def counting(monkeypatch):
    embedder = _CountingEmbedder()
    monkeypatch.setattr(prepared, "load_default_embedder", lambda: embedder)
    clear_prepared()
    yield embedder
    clear_prepared()


async def test_the_same_file_is_embedded_once_and_a_changed_file_again(tmp_path, counting):
    path = tmp_path / "policies.yaml"
    shutil.copy(DATA_DIR / "policies.yaml", path)
    first = await build_file_retriever(path)
    embedded = counting.texts
    assert embedded > 0 and first.vectors is not None and first.reranker is not None
    second = await build_file_retriever(path)
    try:
        assert counting.texts == embedded  # the second call embedded nothing
        assert second.vectors is first.vectors and second.lexical is not first.lexical
        assert (await second.retrieve("How long do I have to return something?", northwind())).items
        queried = counting.texts  # plus the question's vector
    finally:
        await first.close()
        await second.close()
    path.write_text("# revised\n" + path.read_text())  # another version of the file: size and mtime differ
    third = await build_file_retriever(path)
    await third.close()
    assert counting.texts == queried + embedded  # the new version is embedded in full


async def test_lexical_only_needs_no_embedder(tmp_path, counting):
    retriever = await build_file_retriever(DATA_DIR / "policies.yaml", embeddings=False)
    await retriever.close()
    assert retriever.vectors is None and counting.texts == 0


async def test_without_the_extra_it_is_lexical_with_one_log_line(monkeypatch):
    def missing():
        raise EmbeddingUnavailable("embedding search needs onnxruntime and tokenizers: No module named 'onnxruntime'")

    monkeypatch.setattr(prepared, "load_default_embedder", missing)
    monkeypatch.setattr(prepared, "_warned_missing", False)
    clear_prepared()
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    try:
        for _ in range(2):
            retriever = await build_file_retriever(DATA_DIR / "policies.yaml")
            await retriever.close()
            assert retriever.vectors is None
            clear_prepared()
    finally:
        logger.remove(sink)
    assert len(lines) == 1 and "pipecat-harness[retrieval]" in lines[0]
