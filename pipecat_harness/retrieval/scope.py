"""``RetrievalScope``: what the authenticated session allows a search to see.

Built by trusted code from server context, never from the model or the caller; applied as a filter before ranking and
never relaxed ("no eligible evidence"). Of one policy's revisions in effect on the call's date only the latest counts.
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
        authorization: The caller's authorisation scope (``caller``, ``verified_caller``), part of the cache key.
    """

    tenant: str
    products: tuple[str, ...]
    call_date: dt.date
    language: str = "en"
    authorization: str = "caller"

    def __post_init__(self) -> None:
        if not self.tenant:
            raise ScopeError("a retrieval scope needs the tenant from the authenticated session")
        object.__setattr__(self, "products", tuple(sorted({*self.products, GENERAL_PRODUCT})))

    @classmethod
    def from_server_context(cls, context: Mapping[str, Any], *, call_date: dt.date | None = None,
                            language: str = "en") -> RetrievalScope:
        """The scope from trusted server context: ``tenant_id``, ``products`` or ``product``, ``identity_verified``.

        ``ScopeError`` when ``tenant_id`` is missing or empty.
        """
        tenant = str(context.get("tenant_id") or "")
        if not tenant:
            raise ScopeError("server context has no 'tenant_id'; retrieval needs the authenticated tenant")
        raw_products = context.get("products", context.get("product", ()))
        products = (raw_products,) if isinstance(raw_products, str) else tuple(str(p) for p in raw_products or ())
        authorization = "verified_caller" if context.get("identity_verified") else "caller"
        return cls(tenant, products, call_date or dt.date.today(), language, authorization)

    def admits(self, document: PolicyDocument) -> bool:
        """Whether ``document`` passes every filter of this scope."""
        return (document.tenant == self.tenant and document.product in self.products
                and document.language == self.language and document.in_effect(self.call_date))


def eligible_documents(documents: Iterable[PolicyDocument], scope: RetrievalScope) -> list[PolicyDocument]:
    """The documents ``scope`` admits that no later revision of their policy supersedes, in input order."""
    admitted = [d for d in documents if scope.admits(d)]
    latest = {d.policy_key: d for d in sorted(admitted, key=lambda d: (d.effective_from, d.revision, d.doc_id))}
    winners = {doc.doc_id for doc in latest.values()}
    return [d for d in admitted if d.doc_id in winners]


def revision_token(documents: Iterable[PolicyDocument]) -> str:
    """A short digest of which revisions are eligible: it changes when one is added, replaced or expires."""
    digest = hashlib.sha256()
    for doc_id, revision in sorted((d.doc_id, d.revision) for d in documents):
        digest.update(f"{doc_id}\x1f{revision}\x1e".encode())
    return digest.hexdigest()[:16]
