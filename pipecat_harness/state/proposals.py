"""Confirmation proposals in a SQL table on the ledger's database (interface and ``StateStore`` backend re-exported)."""

from __future__ import annotations

import json
import time
from typing import Any

from pipecat_harness.errors import require_extra
from pipecat_harness.state.proposal_store import ProposalStore, StateStoreProposals
from pipecat_harness.state.store import StoreError

__all__ = ["ProposalStore", "SqlProposals", "StateStoreProposals"]


class SqlProposals(ProposalStore):
    """Proposals in a SQL table ``<prefix>proposals`` on the ledger's shared engine (SQLite or PostgreSQL)."""

    def __init__(self, url: str, *, table_prefix: str = "harness_") -> None:
        require_extra("a SQL proposal store", "sqlalchemy", "sqlite")
        from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

        from pipecat_harness.tools.engines import acquire_engine

        self._url = url
        self._shared = acquire_engine(url)
        self._metadata = MetaData()
        self.table = Table(f"{table_prefix}proposals", self._metadata, Column("call_id", String(256), primary_key=True),
                           Column("version", Integer, nullable=False), Column("document", Text, nullable=False),
                           Column("updated_at", Float, nullable=False))

    async def _ensure(self) -> None:
        if self.table.name not in self._shared.created:
            async with self._shared.begin() as conn:
                await conn.run_sync(self._metadata.create_all)
            self._shared.created.add(self.table.name)

    async def load(self, call_id: str) -> tuple[dict[str, Any] | None, int]:
        """The call's document and version."""
        from sqlalchemy import select

        await self._ensure()
        query = select(self.table.c.version, self.table.c.document).where(self.table.c.call_id == call_id)
        async with self._shared.engine.connect() as conn:
            row = (await conn.execute(query)).first()
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
        table = self.table
        try:
            async with self._shared.begin() as conn:
                if expected_version == 0:
                    await conn.execute(table.insert().values(call_id=call_id, version=1, document=text, updated_at=now))
                    return True
                changed = await conn.execute(
                    update(table).where(table.c.call_id == call_id, table.c.version == expected_version)
                    .values(version=expected_version + 1, document=text, updated_at=now))
                return bool(changed.rowcount == 1)
        except IntegrityError:  # another worker inserted the first version
            return False

    async def drop(self) -> None:
        """Drop the table (tests)."""
        async with self._shared.begin() as conn:
            await conn.run_sync(self._metadata.drop_all)
        self._shared.created.discard(self.table.name)

    async def close(self) -> None:
        """Release the shared engine."""
        from pipecat_harness.tools.engines import release_engine

        await release_engine(self._url, self._shared)
