"""Evidence cache keyed by everything that decides what a caller may be told.

The key is tenant, products, the eligible policy revisions, language, query
class and authorisation scope, so a hit can never carry another tenant's
policy, an expired revision or an answer computed for a wider scope. A hit is
a performance event, not an authorisation: the retriever still drops any
cached item that is not eligible for the current scope.

The cache lives in a :class:`~pipecat_harness.state.store.StateStore`
(in-process by default, Redis for many workers).
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
    parts = [
        scope.tenant,
        ",".join(scope.products),
        scope_revision,
        scope.language,
        query_class(query),
        scope.authorization,
    ]
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
    return f"evidence:{scope.tenant}:{digest}"


class EvidenceCache:
    """Stores evidence items per :func:`cache_key`.

    Args:
        store: Backing store (memory or Redis).
        ttl_secs: Lifetime of an entry; cached caller-derived text follows the
            transcript's retention, so keep this short.
    """

    def __init__(self, store: StateStore, *, ttl_secs: float = 600.0) -> None:
        self.store = store
        self.ttl_secs = ttl_secs
        self.hits = 0
        self.misses = 0

    async def get(self, key: str) -> list[EvidenceItem] | None:
        """The cached items, or ``None``."""
        raw: Any = await self.store.get_json(key)
        if not isinstance(raw, list):
            self.misses += 1
            return None
        try:
            items = [EvidenceItem.from_dict(entry) for entry in raw]
        except (KeyError, TypeError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return items

    async def put(self, key: str, items: list[EvidenceItem]) -> None:
        """Cache ``items`` under ``key``."""
        await self.store.set_json(key, [item.to_dict() for item in items], ttl_secs=self.ttl_secs)
