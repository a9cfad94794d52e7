"""The eligible documents of a scope, computed once per scope and kept.

A call's scope (tenant, products, language, call date) does not change from
one question to the next, and many calls share it. :class:`EligibilityIndex`
keeps the documents by tenant and remembers, per scope, which are eligible
(filters plus supersession) and the digest of their revisions, so a search
does not walk the corpus: the cost of a question does not grow with other
tenants' documents, and within a tenant it is paid once per scope.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.scope import RetrievalScope, eligible_documents, revision_token

__all__ = ["Eligibility", "EligibilityIndex"]


@dataclass(frozen=True)
class Eligibility:
    """What one scope may see.

    Parameters:
        documents: The eligible documents.
        ids: Their ids (the same object for every search of the scope).
        revision: Digest of their revisions (see :func:`revision_token`).
    """

    documents: tuple[PolicyDocument, ...]
    ids: frozenset[str]
    revision: str


class EligibilityIndex:
    """Documents by id and by tenant, with the eligible set of recent scopes.

    Args:
        documents: The corpus.
        scopes_kept: Scopes whose eligible set is remembered (least recently used go first).
    """

    def __init__(self, documents: Sequence[PolicyDocument] = (), *, scopes_kept: int = 1024) -> None:
        self._by_id: dict[str, PolicyDocument] = {}
        self._by_tenant: dict[str, dict[str, PolicyDocument]] = {}
        self._scopes: OrderedDict[tuple[object, ...], Eligibility] = OrderedDict()
        self.scopes_kept = scopes_kept
        self.add(documents)

    def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Add or replace ``documents`` (every remembered eligible set is dropped)."""
        for doc in documents:
            old = self._by_id.get(doc.doc_id)
            if old is not None:
                self._by_tenant[old.tenant].pop(doc.doc_id, None)
            self._by_id[doc.doc_id] = doc
            self._by_tenant.setdefault(doc.tenant, {})[doc.doc_id] = doc
        self._scopes.clear()

    @property
    def documents(self) -> list[PolicyDocument]:
        """Every document."""
        return list(self._by_id.values())

    def document(self, doc_id: str) -> PolicyDocument | None:
        """The document ``doc_id``."""
        return self._by_id.get(doc_id)

    def eligible(self, scope: RetrievalScope) -> Eligibility:
        """The scope's eligible documents (remembered for the next search of the same scope)."""
        key = (scope.tenant, scope.products, scope.language, scope.call_date)
        found = self._scopes.get(key)
        if found is not None:
            self._scopes.move_to_end(key)
            return found
        docs = tuple(eligible_documents(self._by_tenant.get(scope.tenant, {}).values(), scope))
        found = Eligibility(docs, frozenset(d.doc_id for d in docs), revision_token(docs))
        self._scopes[key] = found
        while len(self._scopes) > self.scopes_kept:
            self._scopes.popitem(last=False)
        return found
