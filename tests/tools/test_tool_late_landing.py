"""Requests that land late: after Pipecat's deadline, from a thread, from a paused owner, under a skewed clock.

Each goes through a real Pipecat LLM service's function-calling path where
Pipecat is involved, and a real SQLite file and PostgreSQL ledger where the
database is; the backend applies whatever reaches it and refuses a request of
an attempt it has voided (a payment API with an idempotency key and attempt).
"""

import asyncio
import threading
import time
from typing import Any

from pipecat.frames.frames import LLMContextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import Harness
from pipecat_harness.sim.scenario import ModelDecision, ModelScript, ToolCallSpec
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.tools import OperationLedger, OperationRefused, OperationStatus, Reconciliation, ToolGate
from pipecat_harness.tools.execution import current_operation
from pipecat_harness.tools.owners import handler_may_run, owner_gone

REFUND = {"order_id": "#W1", "amount_usd": 45}


class PaymentApi:
    """Applies every request it receives; refuses one whose attempt was voided (fencing)."""

    def __init__(self) -> None:
        self.charges: list[str] = []
        self.voided: set[str] = set()

    def charge(self, fencing_key: str) -> dict[str, Any]:
        if fencing_key in self.voided:
            raise OperationRefused(f"attempt {fencing_key} was voided")
        self.charges.append(fencing_key)
        return {"status": "charged"}

    async def reconcile(self, record) -> Reconciliation:
        if any(charge.startswith(f"{record.idempotency_key}#") for charge in self.charges):
            return Reconciliation(OperationStatus.SUCCEEDED, result={"status": "charged"})
        self.voided.add(record.fencing_key)  # from now on a late request of this attempt is refused
        return Reconciliation(OperationStatus.FAILED, error="no such charge", voided=record.attempt)


def _pipeline(*calls: dict[str, Any], timeout_secs: float | None = None) -> tuple[Harness, ScriptedLLMService]:
    harness = Harness(HarnessConfig().only("tool_gate"), call_id="late-call", write_tools={"issue_refund"})
    decisions = [ModelDecision(tool_calls=[ToolCallSpec(name="issue_refund", args=args) for args in calls]),
                 ModelDecision(say="Okay."), ModelDecision(say="Okay.")]
    llm = ScriptedLLMService(ModelScript(first_token_secs=0, token_secs=0, decisions=decisions),
                             system_instruction="Base prompt.")
    if timeout_secs is not None:
        llm._function_call_timeout_secs = timeout_secs
    return harness, llm


async def test_a_success_after_pipecats_own_deadline_is_told_at_the_next_generation():
    harness, llm = _pipeline(REFUND, timeout_secs=0.1)
    api = PaymentApi()

    async def refund(params: FunctionCallParams) -> None:
        await asyncio.sleep(0.3)  # past Pipecat's function-call deadline
        await params.result_callback(api.charge(current_operation().fencing_key))

    harness.register_function(llm, "issue_refund", refund)
    control = harness.control("tool_gate")
    context = LLMContext(messages=[{"role": "user", "content": "refund please"}])
    await run_test(Pipeline([control.guard, llm]), expected_down_frames=None, frames_to_send=[
        LLMContextFrame(context), SleepFrame(sleep=0.6), LLMContextFrame(context), SleepFrame(sleep=0.2)])
    [unknown] = [d for d in harness.decisions.by_control("tool_gate") if d.action == "forwarded"]
    assert unknown.outcome is None  # Pipecat's deadline cancelled the call: the gate never answered it
    assert len(api.charges) == 1
    told = [c.messages[0]["content"] for c in llm.calls if "went through" in c.messages[0]["content"]]
    assert len(told) == 1 and "issue_refund" in told[0] and "do not repeat it" in told[0]


async def test_a_handler_in_a_thread_keeps_its_lease_until_the_thread_returns(ledger):
    harness, llm = _pipeline(REFUND, timeout_secs=0.1)
    control = harness.control("tool_gate")
    control.ledger = ledger
    control.gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="late-call", timeout_secs=0.2,
                            late_reply_secs=0.0, decisions=control.gate.decisions)
    api = PaymentApi()
    release = threading.Event()

    def blocking_sdk(fencing_key: str) -> dict[str, Any]:
        release.wait(10)
        return api.charge(fencing_key)

    async def refund(params: FunctionCallParams) -> None:
        await params.result_callback(await asyncio.to_thread(blocking_sdk, current_operation().fencing_key))

    harness.register_function(llm, "issue_refund", refund)
    context = LLMContext(messages=[{"role": "user", "content": "refund please"}])
    await run_test(Pipeline([control.guard, llm]), expected_down_frames=None, frames_to_send=[
        LLMContextFrame(context), SleepFrame(sleep=0.4)], send_end_frame=True)
    harness.close()  # the call is over; the thread is still charging
    [record] = await ledger.records()
    assert record.status in (OperationStatus.EXECUTING, OperationStatus.OUTCOME_UNKNOWN)
    assert handler_may_run(record, ledger.clock())  # the lease holds while the thread runs
    assert not owner_gone(record.owner)  # the closed gate's owner stays live until its last handler returned
    other = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="late-call")
    assert (await other.call("issue_refund", REFUND, lambda a: asyncio.sleep(0))).status == "outcome_unknown"
    release.set()
    await control.gate.writes.late_replies.wait()
    [record] = await ledger.records()
    assert record.status == OperationStatus.SUCCEEDED and record.lease_until == 0.0
    assert owner_gone(record.owner) and len(api.charges) == 1


async def test_a_paused_owner_under_a_skewed_clock_charges_once(ledger):
    """Owner A's clock is 20 s behind and it freezes past its lease; B takes over; A's request lands late."""
    api = PaymentApi()
    paused = asyncio.Event()
    skewed = OperationLedger(ledger.engine.url.render_as_string(hide_password=False), table_prefix=ledger.table_prefix)
    skewed.local_clock = lambda: time.time() - 20.0
    await skewed.create_tables()
    assert abs(skewed.clock() - ledger.clock()) < 1.0  # leases are written on the ledger's time, not A's clock
    try:
        owner_a = ToolGate(write_tools={"issue_refund"}, ledger=skewed, session_id="call-1", timeout_secs=0.05)
        owner_a.writes.lease_secs = 0.3

        async def frozen(args: Any) -> Any:
            attempt = current_operation().fencing_key
            await paused.wait()  # a GC pause or VM freeze with the request about to leave
            return api.charge(attempt)

        assert (await owner_a.call("issue_refund", REFUND, frozen)).status == "outcome_unknown"
        [record] = await ledger.records()
        assert handler_may_run(record, ledger.clock())  # not expired at once despite A's clock
        await asyncio.sleep(0.35)  # A's lease runs out while A is frozen
        owner_b = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call-1", timeout_secs=0.5,
                           reconciler=api.reconcile)
        result = await owner_b.call("issue_refund", REFUND,
                                    lambda args: asyncio.sleep(0, api.charge(current_operation().fencing_key)))
        assert result.status == "executed"  # attempt 1 was voided at the backend, attempt 2 charged
        paused.set()  # A wakes and its request of attempt 1 lands
        await owner_a.writes.late_replies.wait()
        assert api.charges == [f"{record.idempotency_key}#2"]
        [final] = await ledger.records()
        assert final.status == OperationStatus.SUCCEEDED and final.attempt == 2
    finally:
        await skewed.close()


async def test_the_sweeper_runs_with_the_pipeline_and_closing_the_harness_closes_the_gate():
    harness, llm = _pipeline(REFUND)
    control = harness.control("tool_gate")
    seen: list[bool] = []

    async def refund(params: FunctionCallParams) -> None:
        seen.append(control.sweeping)
        await params.result_callback({"status": "charged"})

    harness.register_function(llm, "issue_refund", refund)
    context = LLMContext(messages=[{"role": "user", "content": "refund please"}])
    await run_test(Pipeline([control.guard, llm]), expected_down_frames=None,
                   frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=0.2)])
    assert seen == [True] and not control.sweeping  # started with the pipeline, stopped at its EndFrame
    harness.close()
    control.gate.decisions = None  # the call's decision log is closed with it
    later = await control.gate.call("issue_refund", {**REFUND, "amount_usd": 1}, lambda a: asyncio.sleep(0))
    assert later.status == "not_executed" and later.reason_kind == "closed"
