"""The eligible documents of a scope (filters plus supersession), computed once per scope and kept.

A scope does not change between questions and many calls share it, so a search does not walk other tenants' documents.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from pipecat_harness.retrieval.documents import PolicyDocument
from pipecat_harness.retrieval.scope import RetrievalScope, eligible_documents, revision_token

__all__ = ["Eligibility", "EligibilityIndex"]


@dataclass(frozen=True)
class Eligibility:
    """What one scope may see: the eligible documents, their ids (one object per scope) and their revisions' digest."""

    documents: tuple[PolicyDocument, ...]
    ids: frozenset[str]
    revision: str


class EligibilityIndex:
    """Documents by id and by tenant, with the eligible sets of the ``scopes_kept`` most recently used scopes."""

    def __init__(self, documents: Sequence[PolicyDocument] = (), *, scopes_kept: int = 1024) -> None:
        self._by_id: dict[str, PolicyDocument] = {}
        self._by_tenant: dict[str, dict[str, PolicyDocument]] = {}
        self.scopes_kept = scopes_kept
        self._eligible = functools.lru_cache(maxsize=scopes_kept)(self._eligible_of)
        self.add(documents)

    def add(self, documents: Sequence[PolicyDocument]) -> None:
        """Add or replace ``documents`` (every remembered eligible set is dropped)."""
        for doc in documents:
            old = self._by_id.get(doc.doc_id)
            if old is not None:
                self._by_tenant[old.tenant].pop(doc.doc_id, None)
            self._by_id[doc.doc_id] = doc
            self._by_tenant.setdefault(doc.tenant, {})[doc.doc_id] = doc
        self._eligible.cache_clear()

    @property
    def documents(self) -> list[PolicyDocument]:
        """Every document."""
        return list(self._by_id.values())

    def document(self, doc_id: str) -> PolicyDocument | None:
        """The document ``doc_id``."""
        return self._by_id.get(doc_id)

    def eligible(self, scope: RetrievalScope) -> Eligibility:
        """The scope's eligible documents (remembered for the next search of the same scope)."""
        return self._eligible(scope.tenant, scope.products, scope.language, scope.call_date)

    def _eligible_of(self, tenant: str, products: tuple[str, ...], language: str, day: dt.date) -> Eligibility:
        scope = RetrievalScope(tenant, products, day, language)
        docs = tuple(eligible_documents(self._by_tenant.get(tenant, {}).values(), scope))
        return Eligibility(docs, frozenset(d.doc_id for d in docs), revision_token(docs))
