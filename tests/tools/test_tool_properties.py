"""Random schedules of duplicates, errors, timeouts, interruptions and restarts.

Each example drives a gate over a ledger the way a call would, with process
restarts (new gate and ledger objects over the same database) in between, then
checks: no idempotency key executed twice, no request executed twice in one
turn, every settled operation matches what the backend did, and every outbox
event reaches the consumer exactly once.
"""

import asyncio
import contextlib
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipecat_harness.tools import (
    OperationLedger,
    OperationRefused,
    OperationStatus,
    OutboxConsumer,
    OutboxEvent,
    OutboxPublisher,
    Reconciliation,
    ToolGate,
    current_operation,
)
from tests.services import postgres_url

REQUESTS = [
    {"order_id": "#W1", "amount_usd": 45},
    {"order_id": "#W1", "amount_usd": 20},
    {"order_id": "#W2", "amount_usd": 45},
]
BEHAVIOURS = ["ok", "raise", "report_error", "hang_before_write", "hang_after_write"]

step = st.one_of(
    st.tuples(st.just("call"), st.integers(0, 2), st.sampled_from(BEHAVIOURS)),
    st.tuples(st.just("parallel"), st.integers(0, 2), st.sampled_from(["ok", "raise"])),
    st.tuples(st.just("interrupted"), st.integers(0, 2)),
    st.tuples(st.just("turn")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("reconcile")),
    st.tuples(st.just("publish"), st.sampled_from(["ok", "fail", "ack_lost", "crash"])),
)


class Business:
    """The business backend: applies each write's effect, keyed by the idempotency key it was sent."""

    def __init__(self) -> None:
        self.effects: Counter[str] = Counter()
        self.effects_by_turn: Counter[tuple[int, int]] = Counter()
        self.voided: set[str] = set()
        self.release = asyncio.Event()

    def handler(self, request: int, behaviour: str, turn: int):
        async def run(arguments: dict[str, Any]) -> Any:
            operation = current_operation()
            key = operation.idempotency_key

            def apply() -> None:
                if operation.fencing_key in self.voided:  # a late copy of a voided attempt
                    raise OperationRefused("this attempt was voided")
                self.effects[key] += 1
                self.effects_by_turn[(turn, request)] += 1

            if behaviour == "raise":
                raise ConnectionError("backend unavailable")
            if behaviour == "report_error":
                return {"error": "order is not refundable right now"}
            if behaviour == "hang_after_write":
                apply()
            if behaviour.startswith("hang"):
                await self.release.wait()
            if behaviour != "hang_after_write":
                apply()
            return {"refund": key}

        return run

    async def reconcile(self, record) -> Reconciliation:
        # The backend is authoritative: either it applied the key, or it voids the attempt
        # (a hung handler of that attempt that wakes up later is refused).
        if self.effects[record.idempotency_key]:
            return Reconciliation(OperationStatus.SUCCEEDED, result={"refund": record.idempotency_key})
        self.voided.add(record.fencing_key)
        return Reconciliation(OperationStatus.FAILED, error="backend has no such refund", voided=record.attempt)


async def run_schedule(url: str, prefix: str, steps: list[tuple]) -> None:
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    session = "call-1"
    business = Business()
    delivered: Counter[str] = Counter()

    async def handle(event: OutboxEvent) -> None:
        delivered[event.event_id] += 1

    def new_process() -> tuple[OperationLedger, ToolGate]:
        ledger = OperationLedger(url, table_prefix=prefix)
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, tenant=tenant, session_id=session,
                        timeout_secs=0.02, late_reply_secs=0, reconciler=business.reconcile)
        return ledger, gate

    ledger, gate = new_process()
    gates = [gate]
    turn = 0
    gate.new_turn(turn)
    try:
        for action in steps:
            kind = action[0]
            if kind == "call":
                _, request, behaviour = action
                await gate.call("issue_refund", REQUESTS[request], business.handler(request, behaviour, turn))
            elif kind == "parallel":
                _, request, behaviour = action
                handler = business.handler(request, behaviour, turn)
                await asyncio.gather(*(gate.call("issue_refund", REQUESTS[request], handler) for _ in range(2)))
            elif kind == "interrupted":
                result = await gate.call("issue_refund", REQUESTS[action[1]],
                                         business.handler(action[1], "ok", turn), should_proceed=lambda: False)
                assert result.status in ("not_executed", "outcome_unknown")
            elif kind == "turn":
                turn += 1
                gate.new_turn(turn)
            elif kind == "restart":
                await gate.close()  # its handlers go on: the new process shares the database they settle in
                old = ledger
                ledger, gate = new_process()
                await old.close()
                gates.append(gate)
                gate.new_turn(turn)
            elif kind == "reconcile":
                await gate.reconcile_pending()
            elif kind == "publish":
                consumer = OutboxConsumer(ledger, f"consumer-{tenant}", handle)
                mode = action[1]

                async def sink(event: OutboxEvent, mode: str = mode, consumer=consumer) -> None:
                    if mode == "fail":
                        raise ConnectionError("bus down")
                    if mode == "crash":
                        raise SystemExit
                    await consumer(event)
                    if mode == "ack_lost":
                        raise TimeoutError("ack lost")

                with contextlib.suppress(SystemExit):
                    # A publisher that "crashes" keeps its claim until the claim's lease ends.
                    await OutboxPublisher(ledger, sink, claim_secs=0.01).publish_pending()
        business.release.set()  # hung handlers return at last (never cancelled) and settle their records
        for each in gates:
            await each.writes.late_replies.wait()
            await each.close()

        records = await ledger.records(tenant)
        # Exactly once per idempotency key, and at most once per request per turn.
        assert all(count <= 1 for count in business.effects.values()), business.effects
        assert all(count <= 1 for count in business.effects_by_turn.values()), business.effects_by_turn
        for record in records:
            if record.status == OperationStatus.SUCCEEDED:
                assert business.effects[record.idempotency_key] == 1, record
            if record.status in (OperationStatus.FAILED, OperationStatus.CANCELLED):
                assert business.effects[record.idempotency_key] == 0, record
            assert record.status != OperationStatus.EXECUTING, record

        # No lost event: after a final reliable drain, every event was delivered exactly once.
        consumer = OutboxConsumer(ledger, f"consumer-{tenant}", handle)
        await asyncio.sleep(0.02)  # crashed publishers' claims run out
        await OutboxPublisher(ledger, consumer).drain()
        outbox = ledger.tables.outbox
        from sqlalchemy import select

        async with ledger.engine.connect() as conn:
            event_ids = [r.event_id for r in (await conn.execute(
                select(outbox.c.event_id).where(outbox.c.tenant == tenant))).all()]
        assert set(delivered) == set(event_ids)
        assert all(count == 1 for count in delivered.values())
        settled = [r for r in records if r.status != OperationStatus.PREPARED]
        assert len(event_ids) >= len(settled)
    finally:
        await ledger.close()


def _create_tables(url: str, prefix: str) -> None:
    async def create() -> None:
        ledger = OperationLedger(url, table_prefix=prefix)
        try:
            await ledger.create_tables()
        finally:
            await ledger.close()

    asyncio.run(create())


def _drop_tables(url: str, prefix: str) -> None:
    async def drop() -> None:
        ledger = OperationLedger(url, table_prefix=prefix)
        try:
            await ledger.drop_tables()
        finally:
            await ledger.close()

    asyncio.run(drop())


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path):
    prefix = f"p{uuid.uuid4().hex[:10]}_"
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
        _create_tables(url, prefix)
    else:
        url = postgres_url()
        _create_tables(url, prefix)
    yield url, prefix
    _drop_tables(url, prefix)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_random_schedules_execute_once_and_lose_no_event(database, steps):
    url, prefix = database
    asyncio.run(run_schedule(url, prefix, steps))
