"""The outbox: completion events written with the status change, delivered with retries.

:class:`OperationLedger` writes an event row in the same transaction as each
settling status change, so an event exists if and only if the change
committed. :class:`OutboxPublisher` claims a batch of pending rows, delivers
them to a sink and marks them published. Claims make concurrent publishers
(tasks or processes) share the work instead of delivering the same rows: on
PostgreSQL the batch is picked with ``FOR UPDATE SKIP LOCKED``; on SQLite,
which serialises writers, the claiming ``UPDATE`` is atomic by itself. A claim
is a lease (``claim_secs``): a publisher that crashes after claiming loses
nothing, because its rows become claimable again when the lease ends.

Delivery is at least once. :class:`OutboxConsumer` drops repeats by event id;
with ``in_transaction=True`` the handler's effect is written in the same
database transaction as the "consumed" mark, so the effect happens exactly
once even when an event is delivered twice, concurrently, or the consumer
crashes halfway. Publishing runs in its own task, never on the voice loop's
critical path.
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
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from pipecat_harness.tools.ledger import OperationLedger
from pipecat_harness.tools.owners import new_owner, owner_gone

__all__ = ["EventSink", "OutboxConsumer", "OutboxEvent", "OutboxPublisher"]



@dataclass(frozen=True)
class OutboxEvent:
    """One completion event.

    Parameters:
        event_id: Unique id; consumers dedupe on it.
        event_type: ``operation.succeeded``, ``operation.failed``, ``operation.outcome_unknown``...
        tenant: Tenant of the operation.
        idempotency_key: The operation's key.
        payload: The operation's state after the change.
        attempts: Delivery attempts so far.
        claim: The publisher's claim on the row while it delivers it.
    """

    event_id: str
    event_type: str
    tenant: str
    idempotency_key: str
    payload: dict[str, Any]
    attempts: int = 0
    claim: str = ""


def _event(row: Any, claim: str = "") -> OutboxEvent:
    m = row._mapping
    return OutboxEvent(event_id=m["event_id"], event_type=m["event_type"], tenant=m["tenant"],
                       idempotency_key=m["idempotency_key"], payload=json.loads(m["payload"]),
                       attempts=m["attempts"], claim=claim)


EventSink = Callable[[OutboxEvent], Awaitable[None]]
"""Delivers one event; raising means "not delivered, try again later"."""


class OutboxPublisher:
    """Delivers pending outbox events to a sink, with retries.

    Args:
        ledger: The ledger whose outbox to drain.
        sink: Where events go (a queue, a webhook, a message bus).
        max_attempts: Deliveries tried per event before it is left for an operator
            (it stays pending and is reported, never dropped).
        batch_size: Events read per pass.
        retry_delay_secs: Pause between passes after a failed delivery.
        claim_secs: How long a claimed batch is this publisher's before others may take it over.
    """

    def __init__(
        self,
        ledger: OperationLedger,
        sink: EventSink,
        *,
        max_attempts: int = 10,
        batch_size: int = 100,
        retry_delay_secs: float = 0.5,
        claim_secs: float = 30.0,
    ) -> None:
        self.ledger = ledger
        self.sink = sink
        self.max_attempts = max_attempts
        self.batch_size = batch_size
        self.retry_delay_secs = retry_delay_secs
        self.claim_secs = claim_secs
        # An owner token (host, pid): a restarted process takes over a dead publisher's claims at once.
        self.publisher_id = new_owner()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def pending(self) -> list[OutboxEvent]:
        """Return the events not yet published, oldest first (including those out of attempts)."""
        return await self._read(include_exhausted=True)

    async def _read(self, *, include_exhausted: bool) -> list[OutboxEvent]:
        outbox = self.ledger.tables.outbox
        condition: ColumnElement[bool] = outbox.c.published_at.is_(None)
        if not include_exhausted:
            condition = and_(condition, outbox.c.attempts < self.max_attempts)
        query = select(outbox).where(condition).order_by(outbox.c.created_at, outbox.c.seq).limit(self.batch_size)
        async with self.ledger.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_event(r) for r in rows]

    async def claim(self) -> list[OutboxEvent]:
        """Claim up to ``batch_size`` deliverable events nobody else holds; return them, oldest first."""
        outbox = self.ledger.tables.outbox
        now = self.ledger.clock()
        await self._release_dead_claims(now)
        token = f"{self.publisher_id}:{uuid.uuid4().hex[:12]}"
        free = and_(outbox.c.published_at.is_(None), outbox.c.attempts < self.max_attempts,
                    outbox.c.claimed_until < now)
        batch = (select(outbox.c.event_id).where(free).order_by(outbox.c.created_at, outbox.c.seq)
                 .limit(self.batch_size).with_for_update(skip_locked=True))
        async with self.ledger.begin() as conn:
            await conn.execute(update(outbox).where(and_(outbox.c.event_id.in_(batch.scalar_subquery()), free))
                               .values(claimed_by=token, claimed_until=now + self.claim_secs))
            rows = (await conn.execute(select(outbox).where(outbox.c.claimed_by == token)
                                       .order_by(outbox.c.created_at, outbox.c.seq))).all()
        return [_event(r, token) for r in rows]

    async def _release_dead_claims(self, now: float) -> None:
        outbox = self.ledger.tables.outbox
        async with self.ledger.engine.connect() as conn:
            held = {row[0] for row in await conn.execute(
                select(outbox.c.claimed_by).where(and_(outbox.c.published_at.is_(None),
                                                       outbox.c.claimed_until >= now)).distinct())}
        dead = [token for token in held if token and owner_gone(token.rsplit(":", 1)[0])]
        if dead:
            async with self.ledger.begin() as conn:
                await conn.execute(update(outbox).where(outbox.c.claimed_by.in_(dead))
                                   .values(claimed_by=None, claimed_until=0.0))

    async def publish_pending(self) -> tuple[int, int]:
        """Claim a batch of pending events and try once to deliver each.

        Returns:
            ``(delivered, failed)`` counts for this pass.
        """
        outbox = self.ledger.tables.outbox
        delivered = failed = 0
        for event in await self.claim():
            mine = and_(outbox.c.event_id == event.event_id, outbox.c.claimed_by == event.claim)
            try:
                await self.sink(event)
            except Exception as exc:
                failed += 1
                async with self.ledger.begin() as conn:
                    await conn.execute(
                        update(outbox).where(mine)
                        .values(attempts=outbox.c.attempts + 1, last_error=f"{type(exc).__name__}: {exc}",
                                claimed_by=None, claimed_until=0.0)
                    )
                if event.attempts + 1 >= self.max_attempts:
                    attempts = event.attempts + 1
                    logger.error(f"outbox event {event.event_id} undeliverable after {attempts} attempts: {exc}")
                continue
            async with self.ledger.begin() as conn:
                await conn.execute(
                    update(outbox).where(mine)
                    .values(published_at=self.ledger.clock(), attempts=outbox.c.attempts + 1, last_error=None)
                )
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
    """Receives outbox events and hands each event id to its handler once.

    By default the handler runs first and the event id is remembered only
    after it returned, so a handler failure means redelivery rather than loss
    (an effect outside the database can then happen twice if the consumer
    crashes in between). With ``in_transaction=True`` the handler is called as
    ``handler(event, conn)`` inside the transaction that records the event id:
    the effect it writes through ``conn`` and the mark commit together, so the
    effect happens exactly once, even under concurrent duplicate deliveries.

    Args:
        ledger: The ledger whose database stores the consumed event ids.
        name: Consumer name (ids are remembered per consumer).
        handler: What to do with a new event.
        in_transaction: Run the handler in the marking transaction.
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
        async with self.ledger.engine.connect() as conn:
            row = (await conn.execute(
                select(consumed.c.event_id).where(and_(consumed.c.consumer == self.name,
                                                       consumed.c.event_id == event_id))
            )).first()
        return row is not None

    async def _mark(self, conn: AsyncConnection, event: OutboxEvent) -> None:
        await conn.execute(self.ledger.tables.consumed.insert().values(
            consumer=self.name, event_id=event.event_id, consumed_at=self.ledger.clock()
        ))

    async def __call__(self, event: OutboxEvent) -> None:
        """Handle ``event`` unless it was handled before (usable as an :data:`EventSink`)."""
        if self.in_transaction:
            try:
                async with self.ledger.begin() as conn:
                    await self._mark(conn, event)  # a duplicate fails here, before any effect
                    await self.handler(event, conn)
            except IntegrityError:
                self.duplicates += 1
            return
        if await self.seen(event.event_id):
            self.duplicates += 1
            return
        await self.handler(event)
        try:
            async with self.ledger.begin() as conn:
                await self._mark(conn, event)
        except IntegrityError:
            self.duplicates += 1
