"""``RetrievalScope``: what the authenticated session allows a search to see.

The scope is built by trusted code from the session's server context (the
tenant the phone line belongs to, the products on the verified account, the
call's date), never from anything the model or the caller says. Every search
applies it as a filter *before* ranking, and nothing relaxes it when no
document matches: an empty result is reported as "no eligible evidence".
Of the revisions of one policy in effect on the call's date, only the latest
(by ``effective_from``) is eligible.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pipecat_harness.retrieval.documents import GENERAL_PRODUCT, PolicyDocument

__all__ = ["RetrievalScope", "ScopeError", "eligible_documents", "revision_token"]


class ScopeError(ValueError):
    """The server context lacks what a retrieval scope needs."""


@dataclass(frozen=True)
class RetrievalScope:
    """Server-side filters of one search.

    Parameters:
        tenant: The authenticated tenant; documents of any other tenant are invisible.
        products: Products the caller may ask about (``general`` is always included).
        call_date: The day of the call, checked against effective dates.
        language: Language of the documents to search.
        authorization: The caller's authorisation scope (``caller``,
            ``verified_caller``...); part of the cache key so answers computed
            for one scope are never served to another.
    """

    tenant: str
    products: tuple[str, ...]
    call_date: dt.date
    language: str = "en"
    authorization: str = "caller"

    def __post_init__(self) -> None:
        if not self.tenant:
            raise ScopeError("a retrieval scope needs the tenant from the authenticated session")
        products = tuple(sorted({*self.products, GENERAL_PRODUCT}))
        object.__setattr__(self, "products", products)

    @classmethod
    def from_server_context(
        cls,
        context: Mapping[str, Any],
        *,
        call_date: dt.date | None = None,
        language: str = "en",
    ) -> RetrievalScope:
        """Build the scope from trusted server context.

        Reads ``tenant_id`` (required), ``products`` or ``product`` and
        ``identity_verified`` (which selects the ``verified_caller`` scope).

        Raises:
            ScopeError: ``tenant_id`` is missing or empty.
        """
        tenant = str(context.get("tenant_id") or "")
        if not tenant:
            raise ScopeError("server context has no 'tenant_id'; retrieval needs the authenticated tenant")
        raw_products = context.get("products", context.get("product", ()))
        products = (raw_products,) if isinstance(raw_products, str) else tuple(str(p) for p in raw_products or ())
        return cls(
            tenant=tenant,
            products=products,
            call_date=call_date or dt.date.today(),
            language=language,
            authorization="verified_caller" if context.get("identity_verified") else "caller",
        )

    def admits(self, document: PolicyDocument) -> bool:
        """Whether ``document`` passes every filter of this scope."""
        return (
            document.tenant == self.tenant
            and document.product in self.products
            and document.language == self.language
            and document.in_effect(self.call_date)
        )


def eligible_documents(documents: Iterable[PolicyDocument], scope: RetrievalScope) -> list[PolicyDocument]:
    """The documents ``scope`` admits that no later revision of their policy supersedes, in input order."""
    admitted = [d for d in documents if scope.admits(d)]
    latest: dict[tuple[str, str, str, str], PolicyDocument] = {}
    for doc in admitted:
        current = latest.get(doc.policy_key)
        if current is None or (doc.effective_from, doc.revision, doc.doc_id) > (
            current.effective_from, current.revision, current.doc_id
        ):
            latest[doc.policy_key] = doc
    winners = {doc.doc_id for doc in latest.values()}
    return [d for d in admitted if d.doc_id in winners]


def revision_token(documents: Iterable[PolicyDocument]) -> str:
    """A short digest of which document revisions are eligible.

    It changes whenever a policy revision is added, replaced or expires for the
    scope, so cached evidence keyed by it cannot outlive its policy.
    """
    digest = hashlib.sha256()
    for doc_id, revision in sorted((d.doc_id, d.revision) for d in documents):
        digest.update(f"{doc_id}\x1f{revision}\x1e".encode())
    return digest.hexdigest()[:16]
