"""Where a call's confirmation proposals live, so every worker of the call sees the same pending one.

A proposal awaiting the caller's confirmation must outlive the worker that
made it: after a restart, or when another worker takes the call over, the
caller's "yes" confirms the proposal they heard read back, and a correction
replaces it. Each call's proposals are one JSON document with a version;
a save based on a version another worker has moved past is refused
(compare-and-set), so two workers never both think they replaced it.

Backends: :class:`StateStoreProposals` over a
:class:`~pipecat_harness.state.StateStore` (in process, or Redis for many
workers) and :class:`SqlProposals`, a table in a SQL database (SQLite
embedded, PostgreSQL for many workers; by default the operation ledger's).
"""

from __future__ import annotations

import abc
import json
import time
from typing import Any

from pipecat_harness.errors import require_extra
from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.store import StateStore, StoreError

__all__ = ["ProposalStore", "SqlProposals", "StateStoreProposals"]


class ProposalStore(abc.ABC):
    """A versioned JSON document of confirmation proposals per call."""

    @abc.abstractmethod
    async def load(self, call_id: str) -> tuple[dict[str, Any] | None, int]:
        """The call's document and its version (``(None, 0)`` when nothing was saved)."""

    @abc.abstractmethod
    async def save(self, call_id: str, document: dict[str, Any], *, expected_version: int) -> bool:
        """Store ``document`` as version ``expected_version + 1`` if the stored version is ``expected_version``.

        Returns:
            Whether it was stored (``False``: another worker saved first; load again).
        """

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""


class StateStoreProposals(ProposalStore):
    """Proposals in a :class:`StateStore` (memory or Redis), updated under the call's lock.

    Args:
        store: The backing store.
        ttl_secs: How long a call's proposals are kept after their last change.
    """

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
            await self._lock.write(self._key(call_id), {"version": version + 1, "document": document},
                                   ttl_secs=self.ttl_secs)
            return True

        return await self._lock.run_reading(f"proposals:{call_id}", (self._key(call_id),), work)

    async def close(self) -> None:
        """Close the backing store."""
        await self.store.close()


class SqlProposals(ProposalStore):
    """Proposals in a SQL table ``<prefix>proposals`` (SQLite or PostgreSQL through SQLAlchemy).

    Args:
        url: Database URL (``sqlite+aiosqlite:///ledger.db``, ``postgresql+asyncpg://user@host/db``).
        table_prefix: Prefix of the table name (the ledger's, by default).
    """

    def __init__(self, url: str, *, table_prefix: str = "harness_") -> None:
        # The ledger's engine sharing: one pool per URL and loop, SQLite writes serialised in process.
        require_extra("a SQL proposal store", "sqlalchemy", "sqlite")
        from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

        from pipecat_harness.tools.engines import acquire_engine

        self._url = url
        self._shared = acquire_engine(url)
        self._created = False
        metadata = MetaData()
        self.table = Table(
            f"{table_prefix}proposals", metadata,
            Column("call_id", String(256), primary_key=True),
            Column("version", Integer, nullable=False),
            Column("document", Text, nullable=False),
            Column("updated_at", Float, nullable=False),
        )
        self._metadata = metadata

    async def _ensure(self) -> None:
        if self._created:
            return
        name = self.table.name
        if name not in self._shared.created:
            async with self._shared.begin() as conn:
                await conn.run_sync(self._metadata.create_all)
            self._shared.created.add(name)
        self._created = True

    async def load(self, call_id: str) -> tuple[dict[str, Any] | None, int]:
        """The call's document and version."""
        from sqlalchemy import select

        await self._ensure()
        async with self._shared.engine.connect() as conn:
            row = (await conn.execute(
                select(self.table.c.version, self.table.c.document).where(self.table.c.call_id == call_id)
            )).first()
        if row is None:
            return None, 0
        try:
            document = json.loads(row.document)
        except ValueError as exc:
            raise StoreError(f"proposals of call {call_id!r}: stored document is not JSON ({exc})") from exc
        return document, int(row.version)

    async def save(self, call_id: str, document: dict[str, Any], *, expected_version: int) -> bool:
        """Insert the first version, or update only the row still at ``expected_version``."""
        from sqlalchemy import update
        from sqlalchemy.exc import IntegrityError

        await self._ensure()
        text = json.dumps(document, default=str)
        now = time.time()
        try:
            async with self._shared.begin() as conn:
                if expected_version == 0:
                    await conn.execute(self.table.insert().values(call_id=call_id, version=1, document=text,
                                                                  updated_at=now))
                    return True
                changed = await conn.execute(
                    update(self.table)
                    .where(self.table.c.call_id == call_id, self.table.c.version == expected_version)
                    .values(version=expected_version + 1, document=text, updated_at=now)
                )
                return bool(changed.rowcount == 1)
        except IntegrityError:  # another worker inserted the first version
            return False

    async def drop(self) -> None:
        """Drop the table (tests)."""
        async with self._shared.begin() as conn:
            await conn.run_sync(self._metadata.drop_all)
        self._shared.created.discard(self.table.name)
        self._created = False

    async def close(self) -> None:
        """Release the shared engine."""
        from pipecat_harness.tools.engines import release_engine

        await release_engine(self._url, self._shared)
