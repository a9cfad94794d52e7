"""Only the latest revision of a policy in effect on the call's date is evidence, end date or not."""

import datetime as dt

import pytest

from pipecat_harness.retrieval import EvidenceRetriever, RetrievalScope, eligible_documents, parse_documents

SOURCE = "https://help.example/policies/returns"
OLD = {"doc_id": "returns-v1", "tenant": "acme", "product": "general", "revision": "v1",
       "effective_from": "2025-01-01", "source": f"{SOURCE}#v1", "title": "Returns",
       "text": "Items can be returned within 60 days for a full refund."}
NEW = {**OLD, "doc_id": "returns-v2", "revision": "v2", "effective_from": "2026-06-01", "source": f"{SOURCE}#v2",
       "text": "Items can be returned within 30 days for a full refund."}
NEXT = {**OLD, "doc_id": "returns-v3", "revision": "v3", "effective_from": "2027-01-01", "source": f"{SOURCE}#v3",
        "text": "Items can be returned within 14 days for a full refund."}
OTHER = {**OLD, "doc_id": "shipping-v1", "source": "https://help.example/policies/shipping", "title": "Shipping",
         "text": "Returned items are shipped back within 60 days."}


def scope(day: str, *products: str) -> RetrievalScope:
    return RetrievalScope("acme", products, dt.date.fromisoformat(day))


def ids(documents) -> list[str]:
    return [d.doc_id for d in documents]


def test_a_newer_revision_supersedes_an_old_one_that_has_no_end_date():
    documents = parse_documents([OLD, NEW, NEXT, OTHER])
    assert ids(eligible_documents(documents, scope("2026-11-20"))) == ["returns-v2", "shipping-v1"]
    assert ids(eligible_documents(documents, scope("2026-03-01"))) == ["returns-v1", "shipping-v1"]
    assert ids(eligible_documents(documents, scope("2027-02-01"))) == ["returns-v3", "shipping-v1"]


def test_a_revision_that_ended_gives_the_policy_back_to_the_one_before():
    temporary = {**NEW, "effective_to": "2026-08-31"}
    documents = parse_documents([OLD, temporary])
    assert ids(eligible_documents(documents, scope("2026-07-01"))) == ["returns-v2"]
    assert ids(eligible_documents(documents, scope("2026-09-01"))) == ["returns-v1"]


def test_policy_id_links_revisions_with_unrelated_sources_and_products_stay_apart():
    renamed = {**NEW, "source": "https://help.example/returns-2026.pdf", "policy_id": "returns"}
    old = {**OLD, "policy_id": "returns"}
    product = {**NEW, "doc_id": "returns-x1", "product": "x1"}  # same source, another product: its own policy
    documents = parse_documents([old, renamed, product])
    assert ids(eligible_documents(documents, scope("2026-11-20", "x1"))) == ["returns-v2", "returns-x1"]
    # A source fragment that is not the revision names another policy (a handbook's sections).
    sections = parse_documents([{**OLD, "source": f"{SOURCE}#section-1"}, {**NEW, "source": f"{SOURCE}#section-2"}])
    assert len(eligible_documents(sections, scope("2026-11-20"))) == 2


@pytest.mark.parametrize("embedder", ["default", None], ids=["default", "lexical"])
async def test_the_superseded_revision_with_the_callers_words_is_never_evidence(embedder):
    retriever = await EvidenceRetriever.build(parse_documents([OLD, NEW, OTHER]), embedder=embedder)
    try:
        evidence = await retriever.retrieve("Can I return it within 60 days?", scope("2026-11-20"))
        earlier = await retriever.retrieve("Can I return it within 60 days?", scope("2026-03-01"))
    finally:
        await retriever.close()
    assert {i.doc_id for i in evidence.items} == {"returns-v2", "shipping-v1"}
    assert {i.doc_id for i in earlier.items} == {"returns-v1", "shipping-v1"}
    assert evidence.scope_revision != earlier.scope_revision  # the evidence cache cannot serve one for the other
