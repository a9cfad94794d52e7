"""Evidence cache keyed by everything that decides what a caller may be told.

Tenant, products, eligible revisions, language, query class and authorisation are in the key, so a hit cannot carry
another tenant's policy or an expired revision; the retriever still drops items the scope does not admit.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pipecat_harness.retrieval.evidence import EvidenceItem
from pipecat_harness.retrieval.scope import RetrievalScope
from pipecat_harness.retrieval.terms import query_class
from pipecat_harness.state.store import StateStore

__all__ = ["EvidenceCache", "cache_key"]


def cache_key(scope: RetrievalScope, scope_revision: str, query: str) -> str:
    """The cache key of ``query`` under ``scope`` (raw caller text is hashed, never stored in the key)."""
    parts = [scope.tenant, ",".join(scope.products), scope_revision, scope.language, query_class(query),
             scope.authorization]
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
    return f"evidence:{scope.tenant}:{digest}"


class EvidenceCache:
    """Stores evidence items per :func:`cache_key` in ``store`` for ``ttl_secs`` (caller text: keep it short)."""

    def __init__(self, store: StateStore, *, ttl_secs: float = 600.0) -> None:
        self.store = store
        self.ttl_secs = ttl_secs
        self.hits = 0
        self.misses = 0

    async def get(self, key: str) -> list[EvidenceItem] | None:
        """The cached items, or ``None``."""
        raw: Any = await self.store.get_json(key)
        try:
            items = [EvidenceItem.from_dict(entry) for entry in raw] if isinstance(raw, list) else None
        except (KeyError, TypeError, ValueError):
            items = None
        self.hits += items is not None
        self.misses += items is None
        return items

    async def put(self, key: str, items: list[EvidenceItem]) -> None:
        """Cache ``items`` under ``key``."""
        await self.store.set_json(key, [item.to_dict() for item in items], ttl_secs=self.ttl_secs)
