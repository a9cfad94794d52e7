"""The ledger fails or is busy, two writes race for one resource, a cancel lands inside the gate's own writes."""

import asyncio
import random
import sqlite3
import time
from typing import Any

import pytest
from pipecat.frames.frames import LLMContextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import Harness
from pipecat_harness.sim.scenario import ModelDecision, ModelScript, ToolCallSpec
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.tools import OperationLedger, OperationStatus, ToolGate

REFUND = {"order_id": "#W1", "amount_usd": 45}


async def test_a_busy_sqlite_ledger_after_the_handler_ran_is_outcome_unknown_within_the_tools_timeout(tmp_path):
    path = tmp_path / "ledger.db"
    ledger = OperationLedger(f"sqlite+aiosqlite:///{path}")
    await ledger.create_tables()
    charges: list[int] = []
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="busy", timeout_secs=0.5)

        async def refund(args: Any) -> Any:
            charges.append(1)
            blocker.execute("BEGIN IMMEDIATE")  # another process takes the write lock and keeps it
            return {"status": "refunded"}

        started = time.monotonic()
        result = await gate.call("issue_refund", REFUND, refund)
        waited = time.monotonic() - started
        assert result.status == "outcome_unknown" and result.reason_kind == "store_error"
        assert waited < 5  # the tool's own deadline, not SQLite's 30 s busy timeout
        blocker.execute("COMMIT")  # the lock goes; the kept outcome is written by the retry, off the loop
        await gate.writes.late_replies.wait()
        [record] = await ledger.records()
        assert record.status == OperationStatus.SUCCEEDED and charges == [1]
        assert [r.status for r in gate.take_settled()] == [OperationStatus.SUCCEEDED]  # told next generation
        again = await gate.call("issue_refund", REFUND, refund)
        assert again.status == "not_executed" and charges == [1]
    finally:
        blocker.close()
        await ledger.close()


async def test_a_failing_ledger_before_the_handler_is_not_executed_and_after_it_never_is(ledger):
    gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="failing", timeout_secs=0.5,
                    settle_retry_secs=0.0)
    real_settle = ledger.settle

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("the database refuses connections")

    async def refund(args: Any) -> Any:
        ledger.settle = broken  # the database goes away while the handler runs
        return {"status": "refunded"}

    result = await gate.call("issue_refund", REFUND, refund)
    assert result.status == "outcome_unknown"  # it ran: never "not executed"
    ledger.settle = real_settle
    real_start = ledger.start
    ledger.start = broken
    refused = await gate.call("issue_refund", {**REFUND, "amount_usd": 1}, refund)
    assert refused.status == "not_executed" and refused.reason_kind == "store_error"
    ledger.start = real_start


def _llm(*calls: dict[str, Any]) -> ScriptedLLMService:
    script = ModelScript(first_token_secs=0, token_secs=0, decisions=[
        ModelDecision(tool_calls=[ToolCallSpec(name="issue_refund", args=args) for args in calls])])
    return ScriptedLLMService(script)


async def test_two_different_writes_on_one_order_in_one_reply_never_run_at_once(ledger):
    harness = Harness(HarnessConfig().only("tool_gate"), call_id="one-reply", write_tools={"issue_refund"})
    control = harness.control("tool_gate")
    control.gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="one-reply",
                            resources={"issue_refund": lambda args: f"order {args['order_id']}"},
                            decisions=control.gate.decisions)
    llm = _llm(REFUND, {**REFUND, "amount_usd": 20})
    running: list[int] = []
    overlap: list[int] = []

    async def refund(params: FunctionCallParams) -> None:
        running.append(1)
        overlap.append(len(running))
        await asyncio.sleep(0.05)
        running.pop()
        await params.result_callback({"status": "refunded"})

    harness.register_function(llm, "issue_refund", refund)
    context = LLMContext(messages=[{"role": "user", "content": "refund both"}])
    await run_test(Pipeline([control.guard, llm]), expected_down_frames=None,
                   frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=0.3)])
    assert overlap == [1]  # one ran; the other was held as a conflict
    kinds = [d.evidence.get("reason_kind") for d in harness.decisions.by_control("tool_gate")
             if d.action == "not_executed"]
    assert kinds == ["conflict"]


async def test_two_processes_never_run_two_writes_on_one_resource_at_once(ledger):
    url = ledger.engine.url.render_as_string(hide_password=False)
    other = OperationLedger(url, table_prefix=ledger.table_prefix)
    try:
        gates = [ToolGate(write_tools={"issue_refund"}, ledger=each, session_id="shared",
                          resources={"issue_refund": lambda args: f"order {args['order_id']}"})
                 for each in (ledger, other)]
        running: list[int] = []
        overlap: list[int] = []

        async def refund(args: Any) -> Any:
            running.append(1)
            overlap.append(len(running))
            await asyncio.sleep(0.05)
            running.pop()
            return {"status": "refunded"}

        for round_ in range(5):
            results = await asyncio.gather(*(gate.call("issue_refund", {**REFUND, "amount_usd": n + 10 * round_},
                                                       refund) for n, gate in enumerate(gates)))
            assert sorted(r.status for r in results) == ["executed", "not_executed"]
        assert max(overlap) == 1
    finally:
        await other.close()


async def test_a_cancel_anywhere_in_the_gates_own_writes_leaves_nothing_executing(ledger):
    gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="cancels", timeout_secs=1.0)
    rng = random.Random(7)
    ran: list[int] = []

    async def refund(args: Any) -> Any:
        ran.append(1)
        return {"status": "refunded"}

    for n in range(40):
        task = asyncio.create_task(gate.call("issue_refund", {**REFUND, "amount_usd": n}, refund))
        await asyncio.sleep(rng.random() * 0.004)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await gate.writes.late_replies.wait()
    records = await ledger.records()
    assert records and not [r for r in records if r.status == OperationStatus.EXECUTING]
    assert sum(r.status == OperationStatus.SUCCEEDED for r in records) == len(ran)
    never_left = [r for r in records if r.status == OperationStatus.FAILED]
    assert all("before its handler started" in (r.error or "") for r in never_left)
    retried = await gate.call("issue_refund", {**REFUND, "amount_usd": 0}, refund)
    assert retried.status in ("executed", "not_executed")


def _losing(write: Any, after_secs: float = 0.0) -> Any:
    """``write`` that commits (after ``after_secs``) and then loses its answer with the connection."""
    def lost(*args: Any, **kwargs: Any) -> Any:
        async def commit_then_drop() -> Any:
            await asyncio.sleep(after_secs)
            await write(*args, **kwargs)  # the database commits it ...
            raise ConnectionResetError("connection reset by peer")  # ... and the answer never arrives
        return asyncio.ensure_future(commit_then_drop())
    return lost


@pytest.mark.parametrize("late", [False, True], ids=["waited-for", "given-up-on"])
async def test_a_start_or_claim_whose_answer_is_lost_after_it_committed_is_settled_not_left_executing(ledger, late):
    gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="lost-answer", timeout_secs=0.3)
    ran: list[int] = []
    after = 0.5 if late else 0.0  # past the tool's deadline: the caller gave up before the write failed

    async def refund(args: Any) -> Any:
        ran.append(1)
        return {"error": "card declined"} if len(ran) == 1 else {"status": "refunded"}

    def losing(write: Any) -> Any:
        return _losing(write, after)

    real_start = ledger.start
    ledger.start = losing(real_start)
    first = await gate.call("issue_refund", REFUND, refund)
    ledger.start = real_start
    assert first.status == "not_executed" and first.reason_kind == "store_error" and not ran
    await gate.writes.late_replies.wait()
    [record] = await ledger.records()
    assert record.status == OperationStatus.FAILED and "before its handler started" in (record.error or "")

    failed = await gate.call("issue_refund", REFUND, refund)  # runs at once (not "being carried out"), and fails
    assert failed.status == "failed" and ran == [1]
    real_claim = ledger.claim
    ledger.claim = losing(real_claim)
    lost = await gate.call("issue_refund", REFUND, refund)
    ledger.claim = real_claim
    assert lost.status == "not_executed" and ran == [1]
    await gate.writes.late_replies.wait()
    [record] = await ledger.records()
    assert record.status == OperationStatus.FAILED and record.attempt == 3 and "before its handler" in record.error
    again = await gate.call("issue_refund", REFUND, refund)
    assert again.status == "executed" and ran == [1, 1]


async def test_a_late_reply_of_a_voided_attempt_never_settles_the_next_attempt(ledger):
    from pipecat_harness.tools import OperationRefused, Reconciliation

    url = ledger.engine.url.render_as_string(hide_password=False)
    other = OperationLedger(url, table_prefix=ledger.table_prefix)
    b_running, let_a_reply, let_b_reply = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def void(record: Any) -> Any:  # the backend never saw attempt 1: voided, so its late request is refused
        return Reconciliation(OperationStatus.FAILED, error="voided", voided=record.attempt)

    try:
        first = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="moved-on", timeout_secs=0.05,
                         reconciler=void)
        first.writes.lease_secs = 0.1  # the owner lives on, its lease runs out: another process takes over
        second = ToolGate(write_tools={"issue_refund"}, ledger=other, session_id="moved-on", timeout_secs=1.0,
                          reconciler=void)
        real_settle = ledger.settle

        async def slow_settle(*args: Any, **kwargs: Any) -> Any:  # the first gate's ledger answers late
            await b_running.wait()
            return await real_settle(*args, **kwargs)

        ledger.settle = slow_settle

        async def refund_a(args: Any) -> Any:
            await let_a_reply.wait()
            raise OperationRefused("the backend voided this attempt")

        async def refund_b(args: Any) -> Any:
            b_running.set()
            await let_b_reply.wait()
            return {"status": "refunded"}

        assert (await first.call("issue_refund", REFUND, refund_a)).status == "outcome_unknown"
        await asyncio.sleep(0.2)
        second_call = asyncio.create_task(second.call("issue_refund", REFUND, refund_b))
        await b_running.wait()
        await asyncio.sleep(0.05)  # the first gate's late "unknown" lands on attempt 2's record
        let_a_reply.set()
        await first.writes.late_replies.wait()
        assert first.take_settled() == []  # attempt 2 is still running: nothing settled to tell this call's model
        let_b_reply.set()
        assert (await second_call).status == "executed"
        ledger.settle = real_settle
        [record] = await ledger.records()
        assert record.status == OperationStatus.SUCCEEDED and record.attempt == 2
    finally:
        await other.close()
