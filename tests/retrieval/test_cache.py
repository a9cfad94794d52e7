"""The evidence cache is keyed by everything that decides eligibility, and a hit authorises nothing."""

import datetime as dt

from pipecat_harness.retrieval import EvidenceCache, EvidenceItem, EvidenceRetriever, RetrievalScope, cache_key
from tests.retrieval.conftest import CALL_DATE, northwind

QUESTION = "When will I get my money back?"


def test_key_separates_tenant_products_revision_language_query_class_and_scope():
    base = northwind("blender-x200")
    key = cache_key(base, "rev1", QUESTION)
    assert cache_key(base, "rev1", "when will i get my money back") == key  # same query class
    others = [
        cache_key(RetrievalScope("fabrikam", ("blender-x200",), CALL_DATE), "rev1", QUESTION),
        cache_key(northwind("blender-x300"), "rev1", QUESTION),
        cache_key(base, "rev2", QUESTION),
        cache_key(northwind("blender-x200", language="es"), "rev1", QUESTION),
        cache_key(base, "rev1", "How long is the warranty?"),
        cache_key(northwind("blender-x200", authorization="verified_caller"), "rev1", QUESTION),
    ]
    assert key not in others and len(set(others)) == len(others)
    assert QUESTION.lower() not in key  # caller text is not kept in keys


async def test_hit_is_served_and_counted(any_store, documents):
    cache = EvidenceCache(any_store)
    retriever = await EvidenceRetriever.build(documents, cache=cache)
    first = await retriever.retrieve(QUESTION, northwind())
    second = await retriever.retrieve(QUESTION, northwind())
    assert not first.cache_hit and second.cache_hit
    assert [i.doc_id for i in second.items] == [i.doc_id for i in first.items]
    other_tenant = await retriever.retrieve(QUESTION, RetrievalScope("fabrikam", (), CALL_DATE))
    assert not other_tenant.cache_hit and other_tenant.items[0].doc_id == "fb-refund-timing-2026-01"
    await retriever.close()


async def test_poisoned_entry_never_carries_an_ineligible_document(any_store, documents):
    cache = EvidenceCache(any_store)
    retriever = await EvidenceRetriever.build(documents, cache=cache)
    scope = northwind()
    first = await retriever.retrieve(QUESTION, scope)
    # Whatever ends up under the key (a bug, a shared cache misconfigured), another tenant's and an
    # expired document are dropped on the way out because the hit is re-checked against the scope.
    by_id = {d.doc_id: d for d in documents}
    planted = [EvidenceItem.from_document(by_id["fb-refund-timing-2026-01"], 9.0),
               EvidenceItem.from_document(by_id["nw-returns-2025-11"], 8.0), *first.items]
    await cache.put(cache_key(scope, first.scope_revision, QUESTION), planted)
    served = await retriever.retrieve(QUESTION, scope)
    assert served.cache_hit
    assert [i.doc_id for i in served.items] == [i.doc_id for i in first.items]
    await retriever.close()


async def test_a_new_policy_revision_misses_the_cache(any_store, documents):
    cache = EvidenceCache(any_store)
    retriever = await EvidenceRetriever.build(documents, cache=cache)
    scope = northwind()
    await retriever.retrieve(QUESTION, scope)
    later = RetrievalScope("northwind", (), dt.date(2027, 1, 5))  # the 2027 returns revision is now in effect
    evidence = await retriever.retrieve(QUESTION, later)
    assert not evidence.cache_hit
    await retriever.close()
