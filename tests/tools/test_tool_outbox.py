import asyncio

import pytest

from pipecat_harness.tools import OperationLedger, OutboxConsumer, OutboxEvent, OutboxPublisher


async def _settle(ledger: OperationLedger, key: str) -> None:
    record, _ = await ledger.prepare("acme", key, "issue_refund", f"h-{key}")

    async def operation():
        return {"key": key}

    await ledger.execute(record, operation)


async def test_publisher_retries_and_consumer_dedupes(ledger: OperationLedger):
    for key in ("k1", "k2", "k3"):
        await _settle(ledger, key)
    handled: list[str] = []

    async def handle(event: OutboxEvent) -> None:
        handled.append(event.idempotency_key)

    consumer = OutboxConsumer(ledger, "billing", handle)
    failures = {"k2": 2}
    ack_lost = {"k3"}

    async def flaky_sink(event: OutboxEvent) -> None:
        if failures.get(event.idempotency_key, 0) > 0:
            failures[event.idempotency_key] -= 1
            raise ConnectionError("bus unavailable")
        await consumer(event)
        if event.idempotency_key in ack_lost:  # delivered, but the acknowledgement is lost
            ack_lost.discard(event.idempotency_key)
            raise TimeoutError("ack lost")

    publisher = OutboxPublisher(ledger, flaky_sink, retry_delay_secs=0.0)
    assert await publisher.drain() == 3
    assert sorted(handled) == ["k1", "k2", "k3"]
    assert consumer.duplicates == 1
    assert await publisher.pending() == []


async def test_publisher_crash_between_commit_and_publish_loses_nothing(ledger: OperationLedger):
    await _settle(ledger, "k1")

    async def crashing_sink(event: OutboxEvent) -> None:
        raise SystemExit  # the process dies mid-publish

    crashed = OutboxPublisher(ledger, crashing_sink, claim_secs=0.05)
    with pytest.raises(SystemExit):
        await crashed.publish_pending()
    await _settle(ledger, "k2")  # more work commits while no publisher runs
    await asyncio.sleep(0.1)  # the dead publisher's claim runs out

    received: list[str] = []

    async def handle(event: OutboxEvent) -> None:
        received.append(event.idempotency_key)

    restarted = OutboxPublisher(ledger, OutboxConsumer(ledger, "billing", handle))
    assert await restarted.drain() == 2
    assert received == ["k1", "k2"]


async def test_exhausted_events_stay_pending_and_visible(ledger: OperationLedger):
    await _settle(ledger, "k1")

    async def down(event: OutboxEvent) -> None:
        raise ConnectionError("down")

    publisher = OutboxPublisher(ledger, down, max_attempts=2, retry_delay_secs=0.0)
    assert await publisher.drain(max_passes=5) == 0
    pending = await publisher.pending()
    assert [e.attempts for e in pending] == [2]


async def test_background_publisher_delivers_without_blocking(ledger: OperationLedger):
    import asyncio

    delivered = asyncio.Event()

    async def sink(event: OutboxEvent) -> None:
        delivered.set()

    publisher = OutboxPublisher(ledger, sink)
    publisher.start(interval_secs=0.01)
    await _settle(ledger, "k1")
    publisher.notify()
    await asyncio.wait_for(delivered.wait(), 5)
    await publisher.stop()


async def test_concurrent_publishers_share_the_rows_instead_of_delivering_them_twice(ledger: OperationLedger):
    for n in range(30):
        await _settle(ledger, f"k{n}")
    deliveries: list[str] = []

    async def sink(event: OutboxEvent) -> None:
        deliveries.append(event.event_id)
        await asyncio.sleep(0)

    publishers = [OutboxPublisher(ledger, sink, batch_size=5) for _ in range(4)]
    await asyncio.gather(*(p.drain() for p in publishers))
    assert len(deliveries) == len(set(deliveries)) == 30


async def test_a_transactional_consumer_applies_each_event_once_even_when_delivered_twice(ledger: OperationLedger):
    await _settle(ledger, "k1")
    [event] = await OutboxPublisher(ledger, _noop).pending()
    effects: list[str] = []

    async def effect(received: OutboxEvent, conn) -> None:
        effects.append(received.event_id)

    consumer = OutboxConsumer(ledger, "billing", effect, in_transaction=True)
    await asyncio.gather(consumer(event), consumer(event), consumer(event))
    assert effects == [event.event_id] and consumer.duplicates == 2


async def _noop(event: OutboxEvent) -> None:
    pass
