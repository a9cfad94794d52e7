import datetime as dt

import pytest

from pipecat_harness.retrieval import (
    DocumentError,
    RetrievalScope,
    ScopeError,
    load_documents,
    parse_documents,
    revision_token,
)
from pipecat_harness.retrieval.labeled import load_answer_support

BASE = {"doc_id": "d1", "tenant": "t", "product": "general", "revision": "1", "effective_from": "2026-01-01",
        "source": "s", "text": "x"}


def test_fixture_documents_carry_every_field(documents):
    assert len(documents) >= 30
    for doc in documents:
        assert doc.tenant and doc.product and doc.revision and doc.source and doc.language
    tenants = {d.tenant for d in documents}
    assert {"northwind", "fabrikam", "contoso"} <= tenants
    assert any(d.effective_to is not None for d in documents), "fixtures need expired revisions"


def test_bad_record_names_the_record_and_field():
    with pytest.raises(DocumentError, match=r"documents\[1\]: field 'tenant'"):
        parse_documents([BASE, {**BASE, "doc_id": "d2", "tenant": ""}])


def test_dates_out_of_order_and_duplicate_ids_are_refused():
    with pytest.raises(DocumentError, match="before effective_from"):
        parse_documents([{**BASE, "effective_to": "2025-01-01"}])
    with pytest.raises(DocumentError, match="appears twice"):
        parse_documents([BASE, BASE])


def test_unreadable_file_is_one_sentence(tmp_path):
    with pytest.raises(DocumentError, match="cannot read document set"):
        load_documents(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("documents: 3\n")
    with pytest.raises(DocumentError, match="'documents' must be a list"):
        load_documents(tmp_path / "bad.yaml")


def test_scope_comes_from_server_context_and_always_includes_general():
    scope = RetrievalScope.from_server_context(
        {"tenant_id": "northwind", "product": "blender-x200", "identity_verified": True},
        call_date=dt.date(2026, 11, 20),
    )
    assert scope.tenant == "northwind"
    assert scope.products == ("blender-x200", "general")
    assert scope.authorization == "verified_caller"
    with pytest.raises(ScopeError, match="tenant_id"):
        RetrievalScope.from_server_context({"customer_id": "c1"})


def test_scope_filters_tenant_product_language_and_dates(documents):
    by_id = {d.doc_id: d for d in documents}
    scope = RetrievalScope("northwind", ("blender-x200",), dt.date(2026, 11, 20))
    assert scope.admits(by_id["nw-returns-2026-06"])
    assert not scope.admits(by_id["nw-returns-2025-11"])  # expired
    assert not scope.admits(by_id["nw-returns-2027-01"])  # not yet in effect
    assert not scope.admits(by_id["fb-returns-2026-01"])  # another tenant
    assert not scope.admits(by_id["nw-x300-warranty-2026-01"])  # a product the caller does not hold
    assert not scope.admits(by_id["nw-returns-es-2026-06"])  # another language
    assert scope.admits(by_id["nw-x200-warranty-2026-01"])


def test_revision_token_changes_when_a_revision_changes(documents):
    token = revision_token(documents)
    changed = [d.model_copy(update={"revision": "new"}) if i == 0 else d for i, d in enumerate(documents)]
    assert revision_token(changed) != token
    assert revision_token(list(reversed(documents))) == token


def test_labeled_set_loads_with_the_shared_call_date():
    cases = load_answer_support()
    assert len(cases) >= 40
    assert all(c.call_date == dt.date(2026, 11, 20) for c in cases)
    assert any(not c.supported_by for c in cases)
