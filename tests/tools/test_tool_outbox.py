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

    crashed = OutboxPublisher(ledger, crashing_sink)
    with pytest.raises(SystemExit):
        await crashed.publish_pending()
    await _settle(ledger, "k2")  # more work commits while no publisher runs

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
