import asyncio
import itertools

import pytest

from pipecat_harness.tools import (
    ConcurrentUpdate,
    IdempotencyConflict,
    InvalidTransition,
    OperationLedger,
    OperationRefused,
    OperationStatus,
    Reconciliation,
)
from pipecat_harness.tools.ledger import TRANSITIONS, check_transition

S = OperationStatus
ALLOWED = {
    (S.PREPARED, S.EXECUTING), (S.PREPARED, S.CANCELLED),
    (S.EXECUTING, S.SUCCEEDED), (S.EXECUTING, S.FAILED), (S.EXECUTING, S.OUTCOME_UNKNOWN),
    (S.OUTCOME_UNKNOWN, S.SUCCEEDED), (S.OUTCOME_UNKNOWN, S.FAILED),
    (S.FAILED, S.EXECUTING), (S.CANCELLED, S.EXECUTING),
}


@pytest.mark.parametrize(("current", "new"), list(itertools.product(S, S)))
def test_state_machine_is_exactly_the_specified_one(current, new):
    if current == new:
        assert check_transition(current, new) is False  # duplicate observation: allowed, no change
    elif (current, new) in ALLOWED:
        assert check_transition(current, new) is True
    else:
        with pytest.raises(InvalidTransition):
            check_transition(current, new)
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == ALLOWED


async def test_prepare_is_idempotent_and_rejects_a_different_request(ledger: OperationLedger):
    record, created = await ledger.prepare("acme", "k1", "issue_refund", "h1")
    assert created and record.status == S.PREPARED and record.version == 1
    again, created_again = await ledger.prepare("acme", "k1", "issue_refund", "h1")
    assert not created_again and again == record
    with pytest.raises(IdempotencyConflict, match="different request"):
        await ledger.prepare("acme", "k1", "issue_refund", "h2")
    other_tenant, created_other = await ledger.prepare("globex", "k1", "issue_refund", "h2")
    assert created_other and other_tenant.tenant == "globex"


async def test_execute_runs_once_and_stores_the_outcome(ledger: OperationLedger):
    runs = []

    async def operation():
        runs.append(1)
        return {"refund_id": 7}

    record, _ = await ledger.prepare("acme", "k1", "issue_refund", "h1")
    done = await ledger.execute(record, operation)
    assert done.status == S.SUCCEEDED and done.result == {"refund_id": 7} and done.version == 3
    stored, created = await ledger.prepare("acme", "k1", "issue_refund", "h1")
    assert not created and stored.status == S.SUCCEEDED and stored.result == {"refund_id": 7}
    assert (await ledger.execute(stored, operation)).status == S.SUCCEEDED
    assert runs == [1]


async def test_execute_failure_timeout_and_reported_error(ledger: OperationLedger):
    async def boom():
        raise ValueError("connection reset")

    async def refused():
        raise OperationRefused("card declined")

    async def never():
        await asyncio.Event().wait()

    async def reports():
        return {"error": "order not found"}

    ambiguous = await ledger.execute((await ledger.prepare("a", "f", "t", "h"))[0], boom)
    assert ambiguous.status == S.OUTCOME_UNKNOWN and ambiguous.error == "ValueError: connection reset"
    failed = await ledger.execute((await ledger.prepare("a", "n", "t", "h"))[0], refused)
    assert failed.status == S.FAILED and "card declined" in failed.error
    unknown = await ledger.execute((await ledger.prepare("a", "u", "t", "h"))[0], never, timeout_secs=0.05)
    assert unknown.status == S.OUTCOME_UNKNOWN and "no reply within" in unknown.error
    reported = await ledger.execute((await ledger.prepare("a", "r", "t", "h"))[0], reports,
                                    is_failure=lambda r: "error" in r)
    assert reported.status == S.FAILED and reported.result == {"error": "order not found"}


async def test_transitions_use_compare_and_set(ledger: OperationLedger):
    record, _ = await ledger.prepare("acme", "k1", "issue_refund", "h1")
    executing = await ledger.claim(record)
    assert executing is not None and executing.version == 2
    assert await ledger.claim(record) is None  # a second worker cannot claim it
    settled = await ledger.transition(executing, S.SUCCEEDED, result={"ok": True})
    # A stale copy re-observing the stored state is fine; moving it elsewhere is not.
    assert (await ledger.transition(executing, S.SUCCEEDED)).version == settled.version
    with pytest.raises(InvalidTransition):
        await ledger.transition(executing, S.FAILED)
    with pytest.raises(InvalidTransition):
        await ledger.transition(settled, S.EXECUTING)
    assert (await ledger.get("acme", "k1")).status == S.SUCCEEDED


async def test_concurrent_claims_execute_once(ledger: OperationLedger):
    runs = []

    async def operation():
        runs.append(1)
        await asyncio.sleep(0.01)
        return "done"

    record, _ = await ledger.prepare("acme", "k1", "issue_refund", "h1")
    results = await asyncio.gather(*(ledger.execute(record, operation) for _ in range(4)))
    assert len(runs) == 1
    assert {r.status for r in results} <= {S.EXECUTING, S.SUCCEEDED}


async def test_cancel_and_reconcile(ledger: OperationLedger):
    prepared, _ = await ledger.prepare("acme", "c", "t", "h")
    cancelled = await ledger.cancel(prepared, "interrupted before issue")
    assert cancelled.status == S.CANCELLED
    with pytest.raises(InvalidTransition):
        await ledger.transition(cancelled, S.SUCCEEDED)
    retried = await ledger.claim(cancelled, owner="w1")  # never executed: a later request may run it
    assert retried.status == S.EXECUTING and retried.attempt == 1 and retried.owner == "w1"

    record, _ = await ledger.prepare("acme", "u", "t", "h")
    unknown = await ledger.mark_unknown(await ledger.claim(record), "process ended")
    assert unknown.status == S.OUTCOME_UNKNOWN

    async def cannot_tell(_record):
        return None

    async def it_happened(_record):
        return Reconciliation(S.SUCCEEDED, result={"refund_id": 3})

    assert (await ledger.reconcile(unknown, cannot_tell)).status == S.OUTCOME_UNKNOWN
    settled = await ledger.reconcile(unknown, it_happened)
    assert settled.status == S.SUCCEEDED and settled.result == {"refund_id": 3}
    assert [r.idempotency_key for r in await ledger.find("acme", S.OUTCOME_UNKNOWN)] == []


async def test_status_change_and_event_commit_together(ledger: OperationLedger):
    record, _ = await ledger.prepare("acme", "k1", "issue_refund", "h1")

    async def operation():
        return {"refund_id": 1}

    await ledger.execute(record, operation)
    async with ledger.engine.connect() as conn:
        from sqlalchemy import select

        rows = (await conn.execute(select(ledger.tables.outbox))).all()
    assert [(r.event_type, r.seq) for r in rows] == [("operation.succeeded", 3)]

    # A transition whose event cannot be written does not happen either.
    second, _ = await ledger.prepare("acme", "k2", "issue_refund", "h2")
    claimed = await ledger.claim(second)
    async with ledger.engine.begin() as conn:  # occupy the event slot the transition would use
        await conn.execute(ledger.tables.outbox.insert().values(
            event_id="blocker", seq=3, tenant="acme", idempotency_key="k2", event_type="x", payload="{}",
            created_at=0.0, attempts=0))
    with pytest.raises(Exception):  # noqa: B017 - the backend's integrity error
        await ledger.transition(claimed, S.SUCCEEDED, result={"refund_id": 2})
    assert (await ledger.get("acme", "k2")).status == S.EXECUTING


async def test_gives_up_after_repeated_concurrent_changes(ledger: OperationLedger, monkeypatch):
    from dataclasses import replace

    record, _ = await ledger.prepare("acme", "k1", "t", "h")
    executing = await ledger.claim(record)
    real_get = ledger.get

    async def moving_get(tenant, key):  # every re-read finds yet another version
        stored = await real_get(tenant, key)
        return replace(stored, version=stored.version + 100)

    monkeypatch.setattr(ledger, "get", moving_get)
    with pytest.raises(ConcurrentUpdate, match="kept changing"):
        await ledger.transition(replace(executing, version=99), S.SUCCEEDED)


async def test_succeeded_operations_of_one_call_serve_the_graders_action_checks(ledger):
    from pipecat_harness.grader.actions import OperationLedgerView
    from pipecat_harness.tools import ToolGate

    async def refund(args):
        return {"status": "refunded"}

    async def failing(args):
        raise RuntimeError("down")

    call = ToolGate(write_tools={"issue_refund", "cancel_pending_order"}, ledger=ledger, session_id="call_1%")
    other = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call_2")
    await call.call("issue_refund", {"order_id": "#W1", "amount_usd": 5}, refund)
    await call.call("cancel_pending_order", {"order_id": "#W1"}, failing)
    await other.call("issue_refund", {"order_id": "#W2", "amount_usd": 5}, refund)
    assert isinstance(ledger, OperationLedgerView)
    assert [r.op_type for r in await ledger.succeeded_operations("call_1%")] == ["issue_refund"]
    assert [r.op_type for r in await ledger.succeeded_operations("call_2")] == ["issue_refund"]
    assert await ledger.succeeded_operations("call_") == []
