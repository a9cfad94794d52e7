"""Lexical retrieval on SQLite FTS5 and PostgreSQL: the filters hold whatever the words match."""

from pipecat_harness.retrieval import RetrievalScope
from pipecat_harness.retrieval.labeled import evaluate, load_answer_support
from tests.retrieval.conftest import CALL_DATE, northwind

EXACT_WORDS = "Can I return a damaged blender for a full refund?"


async def test_other_tenants_policy_with_the_callers_exact_words_is_never_evidence(lexical_retriever):
    # The trap is real: for its own tenant the fabrikam text is the best match for these words.
    fabrikam = await lexical_retriever.retrieve(EXACT_WORDS, RetrievalScope("fabrikam", ("blender-x200",), CALL_DATE))
    assert fabrikam.items[0].doc_id == "fb-returns-2026-01"

    evidence = await lexical_retriever.retrieve(EXACT_WORDS, northwind("blender-x200"))
    ids = [item.doc_id for item in evidence.items]
    assert evidence.status == "evidence"
    assert not any(i.startswith("fb-") for i in ids)
    assert "nw-returns-2025-11" not in ids  # expired, and it has the exact phrase
    assert "nw-returns-2027-01" not in ids  # not yet in effect
    assert {"nw-damaged-2026-06", "nw-returns-2026-06"} & set(ids)


async def test_expired_revision_is_evidence_only_on_a_date_it_was_in_effect(lexical_retriever):
    import datetime as dt

    old_call = RetrievalScope("northwind", (), dt.date(2026, 2, 1))
    evidence = await lexical_retriever.retrieve("return within 60 days", old_call)
    ids = [item.doc_id for item in evidence.items]
    assert "nw-returns-2025-11" in ids and "nw-returns-2026-06" not in ids


async def test_similar_product_policy_follows_the_callers_product(lexical_retriever):
    x200 = await lexical_retriever.retrieve("How long is the warranty on my blender?", northwind("blender-x200"))
    x300 = await lexical_retriever.retrieve("How long is the warranty on my blender?", northwind("blender-x300"))
    assert x200.items[0].doc_id == "nw-x200-warranty-2026-01"
    assert x300.items[0].doc_id == "nw-x300-warranty-2026-01"
    assert "nw-x300-warranty-2026-01" not in [i.doc_id for i in x200.items]


async def test_tenant_without_policies_gets_no_eligible_evidence_never_a_relaxed_search(lexical_retriever):
    evidence = await lexical_retriever.retrieve(EXACT_WORDS, RetrievalScope("tailspin", (), CALL_DATE))
    assert evidence.status == "no_eligible_evidence" and evidence.items == []
    assert "clarifying question" in evidence.for_model()["next_step"]


async def test_evidence_cites_source_revision_and_effective_dates(lexical_retriever):
    evidence = await lexical_retriever.retrieve("When will I get my money back?", northwind())
    top = evidence.items[0]
    assert top.doc_id == "nw-refund-timing-2026-01"
    rendered = evidence.for_model()["evidence"][0]
    assert rendered["source"].startswith("https://help.northwind.example/")
    assert rendered["revision"] == "2026-01" and rendered["effective_from"] == "2026-01-01"


async def test_labeled_set_lexical_figures(lexical_retriever):
    figures = await evaluate(lexical_retriever, load_answer_support(), k=5)
    assert figures.wrong_tenant_hits == 0 and figures.expired_hits == 0
    assert figures.no_evidence_correct == figures.no_evidence_cases
    # Lexical alone misses paraphrases (the embedding search is for those); it must still carry most cases.
    assert figures.recall >= 0.85, figures.misses


async def test_replacing_a_document_replaces_its_words_and_an_old_sqlite_file_is_rebuilt(tmp_path, documents):
    import sqlite3

    from pipecat_harness.retrieval import SqliteLexicalIndex

    path = tmp_path / "index.db"
    with sqlite3.connect(path) as conn:  # an index file from before scope tokens
        conn.execute("CREATE TABLE harness_policy_docs (doc_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
                     " product TEXT NOT NULL, language TEXT NOT NULL, revision TEXT NOT NULL,"
                     " effective_from TEXT NOT NULL, effective_to TEXT)")
        conn.execute("CREATE VIRTUAL TABLE harness_policy_fts USING fts5(doc_id UNINDEXED, title, body)")
        conn.execute("INSERT INTO harness_policy_fts VALUES ('stale', 'Returns', 'return anything forever')")
    index = SqliteLexicalIndex(f"sqlite+aiosqlite:///{path}")
    try:
        await index.create()
        by_id = {d.doc_id: d for d in documents}
        await index.add([by_id["nw-refund-timing-2026-01"]])
        await index.add([by_id["nw-refund-timing-2026-01"].model_copy(update={"text": "Refunds take a fortnight."})])
        assert await index.search("business days", northwind()) == []
        assert [hit[0] for hit in await index.search("fortnight", northwind())] == ["nw-refund-timing-2026-01"]
        assert await index.search("forever", northwind()) == []
    finally:
        await index.close()
