"""The outbox: completion events written with the status change, delivered at least once.

The ledger writes an event in the transaction of each settling change, so it exists if and only if the change
committed. Publishers claim batches (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite's claiming ``UPDATE`` is
atomic) under a lease, so concurrent publishers share the work and a crashed one loses nothing. Consumers drop
repeats by event id, or with ``in_transaction=True`` write the effect with the "consumed" mark: exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loguru import logger
from sqlalchemy import and_, select, update
from sqlalchemy.exc import IntegrityError

from pipecat_harness.tools.ledger import OperationLedger
from pipecat_harness.tools.owners import new_owner, owner_gone

__all__ = ["EventSink", "OutboxConsumer", "OutboxEvent", "OutboxPublisher"]


@dataclass(frozen=True)
class OutboxEvent:
    """One completion event; consumers dedupe on ``event_id``, and ``claim`` is the publisher's while it delivers it."""

    event_id: str
    event_type: str
    tenant: str
    idempotency_key: str
    payload: dict[str, Any]
    attempts: int = 0
    claim: str = ""


def _event(row: Any, claim: str = "") -> OutboxEvent:
    m = row._mapping
    payload = json.loads(m["payload"])
    return OutboxEvent(m["event_id"], m["event_type"], m["tenant"], m["idempotency_key"], payload, m["attempts"], claim)


EventSink = Callable[[OutboxEvent], Awaitable[None]]
"""Delivers one event; raising means "not delivered, try again later"."""


class OutboxPublisher:
    """Delivers pending outbox events to a sink (a queue, a webhook, a bus) with retries, off the voice loop.

    An event out of its ``max_attempts`` stays pending and is reported, never dropped; a claimed batch is this
    publisher's for ``claim_secs``.
    """

    def __init__(self, ledger: OperationLedger, sink: EventSink, *, max_attempts: int = 10, batch_size: int = 100,
                 retry_delay_secs: float = 0.5, claim_secs: float = 30.0) -> None:
        self.ledger = ledger
        self.sink = sink
        self.max_attempts = max_attempts
        self.batch_size = batch_size
        self.retry_delay_secs = retry_delay_secs
        self.claim_secs = claim_secs
        self.publisher_id = new_owner()  # (host, pid): a restarted process takes over a dead one's claims at once
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def pending(self) -> list[OutboxEvent]:
        """Return the events not yet published, oldest first (including those out of attempts)."""
        outbox = self.ledger.tables.outbox
        query = select(outbox).where(outbox.c.published_at.is_(None)).order_by(outbox.c.created_at, outbox.c.seq)
        async with self.ledger.engine.connect() as conn:
            return [_event(r) for r in (await conn.execute(query.limit(self.batch_size))).all()]

    async def claim(self) -> list[OutboxEvent]:
        """Claim up to ``batch_size`` deliverable events nobody else holds; return them, oldest first."""
        outbox = self.ledger.tables.outbox
        now = self.ledger.clock()
        await self._release_dead_claims(now)
        token = f"{self.publisher_id}:{uuid.uuid4().hex[:12]}"
        free = and_(outbox.c.published_at.is_(None), outbox.c.attempts < self.max_attempts,
                    outbox.c.claimed_until < now)
        oldest = (outbox.c.created_at, outbox.c.seq)
        batch = select(outbox.c.event_id).where(free).order_by(*oldest).limit(self.batch_size)
        claimed = and_(outbox.c.event_id.in_(batch.with_for_update(skip_locked=True).scalar_subquery()), free)
        async with self.ledger.begin() as conn:
            claim = update(outbox).where(claimed).values(claimed_by=token, claimed_until=now + self.claim_secs)
            await conn.execute(claim)
            rows = (await conn.execute(select(outbox).where(outbox.c.claimed_by == token).order_by(*oldest))).all()
        return [_event(r, token) for r in rows]

    async def _release_dead_claims(self, now: float) -> None:
        outbox = self.ledger.tables.outbox
        claims = select(outbox.c.claimed_by).where(outbox.c.published_at.is_(None), outbox.c.claimed_until >= now)
        async with self.ledger.engine.connect() as conn:
            held = {row[0] for row in await conn.execute(claims.distinct())}
        dead = [token for token in held if token and owner_gone(token.rsplit(":", 1)[0])]
        if dead:
            async with self.ledger.begin() as conn:
                released = update(outbox).where(outbox.c.claimed_by.in_(dead))
                await conn.execute(released.values(claimed_by=None, claimed_until=0.0))

    async def publish_pending(self) -> tuple[int, int]:
        """Claim a batch of pending events and try once to deliver each; return ``(delivered, failed)``."""
        outbox = self.ledger.tables.outbox
        delivered = failed = 0
        for event in await self.claim():
            mine = update(outbox).where(outbox.c.event_id == event.event_id, outbox.c.claimed_by == event.claim)
            try:
                await self.sink(event)
            except Exception as exc:
                failed += 1
                retry = mine.values(attempts=outbox.c.attempts + 1, last_error=f"{type(exc).__name__}: {exc}")
                async with self.ledger.begin() as conn:
                    await conn.execute(retry.values(claimed_by=None, claimed_until=0.0))
                if (attempts := event.attempts + 1) >= self.max_attempts:
                    logger.error(f"outbox event {event.event_id} undeliverable after {attempts} attempts: {exc}")
                continue
            async with self.ledger.begin() as conn:
                await conn.execute(mine.values(published_at=self.ledger.clock(), attempts=outbox.c.attempts + 1,
                                               last_error=None))
            delivered += 1
        return delivered, failed

    async def drain(self, *, max_passes: int = 20) -> int:
        """Publish until nothing deliverable is pending (or ``max_passes``); return events delivered."""
        total = 0
        for _ in range(max_passes):
            delivered, failed = await self.publish_pending()
            total += delivered
            if not failed and delivered < self.batch_size:
                break
            if failed:
                await asyncio.sleep(self.retry_delay_secs)
        return total

    def notify(self) -> None:
        """Wake the background publisher (new events were committed)."""
        self._wake.set()

    def start(self, *, interval_secs: float = 1.0) -> None:
        """Run the publisher in a background task until :meth:`stop`."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(interval_secs), name="outbox-publisher")

    async def stop(self) -> None:
        """Stop the background task (pending events stay in the outbox)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self, interval_secs: float) -> None:
        while True:
            try:
                _, failed = await self.publish_pending()
            except Exception:
                logger.exception("outbox publisher pass failed; retrying")
                failed = 1
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.retry_delay_secs if failed else interval_secs)


class OutboxConsumer:
    """Hands each event id to its handler once per consumer ``name``.

    By default the id is remembered after the handler returned (a failure means redelivery, not loss; an outside
    effect may then repeat after a crash). With ``in_transaction=True`` it is ``handler(event, conn)`` inside the
    transaction that records the id: the effect it writes through ``conn`` commits with the mark, exactly once.
    """

    def __init__(self, ledger: OperationLedger, name: str, handler: Callable[..., Awaitable[None]], *,
                 in_transaction: bool = False) -> None:
        self.ledger = ledger
        self.name = name
        self.handler = handler
        self.in_transaction = in_transaction
        self.duplicates = 0

    async def seen(self, event_id: str) -> bool:
        """Whether this consumer already handled the event."""
        consumed = self.ledger.tables.consumed
        query = select(consumed.c.event_id).where(consumed.c.consumer == self.name, consumed.c.event_id == event_id)
        async with self.ledger.engine.connect() as conn:
            return (await conn.execute(query)).first() is not None

    async def __call__(self, event: OutboxEvent) -> None:
        """Handle ``event`` unless it was handled before (usable as an :data:`EventSink`)."""
        if not self.in_transaction and await self.seen(event.event_id):
            self.duplicates += 1
            return
        if not self.in_transaction:
            await self.handler(event)
        try:
            async with self.ledger.begin() as conn:
                mark = {"consumer": self.name, "event_id": event.event_id, "consumed_at": self.ledger.clock()}
                # A duplicate fails here, before any effect in a transaction.
                await conn.execute(self.ledger.tables.consumed.insert().values(mark))
                if self.in_transaction:
                    await self.handler(event, conn)
        except IntegrityError:
            self.duplicates += 1
