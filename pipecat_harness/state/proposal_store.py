"""Where a call's confirmation proposals live, so every worker of the call sees the same pending one.

One JSON document per call, versioned and saved by compare-and-set: in a ``StateStore`` (memory or Redis) here, or
in a SQL table (:class:`~pipecat_harness.state.proposals.SqlProposals`, the store layer).
"""

from __future__ import annotations

import abc
from typing import Any

from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.store import StateStore, StoreError

__all__ = ["ProposalStore", "StateStoreProposals"]


class ProposalStore(abc.ABC):
    """A versioned JSON document of confirmation proposals per call."""

    @abc.abstractmethod
    async def load(self, call_id: str) -> tuple[dict[str, Any] | None, int]:
        """The call's document and its version (``(None, 0)`` when nothing was saved)."""

    @abc.abstractmethod
    async def save(self, call_id: str, document: dict[str, Any], *, expected_version: int) -> bool:
        """Store ``document`` as the next version if the stored one is ``expected_version`` (else ``False``: reload)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""


class StateStoreProposals(ProposalStore):
    """Proposals in a :class:`StateStore` (memory or Redis), kept ``ttl_secs``, saved under the call's lock."""

    def __init__(self, store: StateStore, *, ttl_secs: float = 24 * 3600.0) -> None:
        self.store = store
        self.ttl_secs = ttl_secs
        self._lock = CallLock(store, ttl_secs=1.0, work_timeout_secs=2.0)

    @staticmethod
    def _key(call_id: str) -> str:
        return f"proposals:{call_id}"

    async def load(self, call_id: str) -> tuple[dict[str, Any] | None, int]:
        """The call's document and version."""
        return self._parsed(call_id, await self.store.get_json(self._key(call_id)))

    @staticmethod
    def _parsed(call_id: str, raw: Any | None) -> tuple[dict[str, Any] | None, int]:
        if raw is None:
            return None, 0
        if not isinstance(raw, dict) or not isinstance(raw.get("document"), dict):
            raise StoreError(f"proposals of call {call_id!r}: the stored value is not a proposal document")
        return raw["document"], int(raw.get("version", 0))

    async def save(self, call_id: str, document: dict[str, Any], *, expected_version: int) -> bool:
        """Compare-and-set under the per-call lock (fenced: a worker that lost the lock writes nothing)."""

        async def work(values: tuple[Any | None, ...]) -> bool:
            _, version = self._parsed(call_id, values[0])
            if version != expected_version:
                return False
            stored = {"version": version + 1, "document": document}
            await self._lock.write(self._key(call_id), stored, ttl_secs=self.ttl_secs)
            return True

        return await self._lock.run_reading(self._key(call_id), (self._key(call_id),), work)

    async def close(self) -> None:
        """Close the backing store."""
        await self.store.close()
