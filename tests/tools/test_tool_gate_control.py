import asyncio
import json
from typing import Any

from pipecat.frames.frames import (
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    LLMContextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallFromLLM, FunctionCallParams
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import Harness
from pipecat_harness.sim.scenario import ModelDecision, ModelScript, ToolCallSpec
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.tools.control import ToolGateControl

REFUND = {"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged"}


def _harness(*controls: str) -> Harness:
    return Harness(HarnessConfig().only(*controls), call_id="test-call", write_tools={"issue_refund"})


def _llm(*calls: tuple[str, dict[str, Any]]) -> ScriptedLLMService:
    script = ModelScript(first_token_secs=0, token_secs=0, decisions=[
        ModelDecision(tool_calls=[ToolCallSpec(name=name, args=args) for name, args in calls])])
    return ScriptedLLMService(script)


class Counting:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    async def __call__(self, params: FunctionCallParams) -> None:
        self.calls.append(dict(params.arguments))
        if self.fail:
            raise RuntimeError("refund service unavailable")
        await params.result_callback({"refund_id": len(self.calls), "status": "refunded"})


async def _run(llm: ScriptedLLMService) -> list[FunctionCallResultFrame]:
    context = LLMContext(messages=[{"role": "user", "content": "refund please"}])
    down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=0.2)])
    return [f for f in down if isinstance(f, FunctionCallResultFrame)]


async def test_duplicate_write_in_one_reply_executes_once_and_both_calls_get_results():
    harness = _harness("tool_gate")
    llm = _llm(("issue_refund", REFUND), ("issue_refund", {**REFUND, "amount_usd": 45.0}))
    handler = Counting()
    harness.register_function(llm, "issue_refund", handler)
    assert llm._functions["issue_refund"].cancel_on_interruption is False
    results = await _run(llm)
    assert len(handler.calls) == 1
    assert len(results) == 2 and len({r.tool_call_id for r in results}) == 2
    statuses = sorted(r.result.get("status") for r in results)
    assert statuses == ["not_executed", "refunded"]
    actions = [d.action for d in harness.decisions.by_control("tool_gate")]
    assert actions.count("forwarded") == 1 and actions.count("not_executed") == 1


async def test_without_the_control_both_duplicates_execute():
    harness = _harness()
    llm = _llm(("issue_refund", REFUND), ("issue_refund", REFUND))
    handler = Counting()
    harness.register_function(llm, "issue_refund", handler)
    await _run(llm)
    assert len(handler.calls) == 2 and harness.decisions.decisions == []


async def test_reads_and_different_writes_pass_untouched():
    harness = _harness("tool_gate")
    llm = _llm(("get_order_details", {"order_id": "#W1"}), ("get_order_details", {"order_id": "#W1"}),
               ("issue_refund", REFUND), ("issue_refund", {**REFUND, "order_id": "#W7209932"}))
    reads, writes = Counting(), Counting()
    harness.register_function(llm, "get_order_details", reads, write=False)
    harness.register_function(llm, "issue_refund", writes)
    assert llm._functions["get_order_details"].cancel_on_interruption is True
    results = await _run(llm)
    assert len(reads.calls) == 2 and len(writes.calls) == 2 and len(results) == 4
    assert all(r.result["status"] == "refunded" for r in results)


async def test_handler_that_raises_gets_a_clear_result_and_a_decision():
    harness = _harness("tool_gate")
    llm = _llm(("issue_refund", REFUND))
    harness.register_function(llm, "issue_refund", Counting(fail=True))
    (result,) = await _run(llm)
    # It raised after the request may have reached the backend: unknown, not a retryable failure.
    assert result.result["status"] == "outcome_unknown" and "refund service unavailable" in result.result["reason"]
    (decision,) = harness.decisions.by_control("tool_gate")
    assert decision.action == "forwarded" and decision.outcome["status"] == "outcome_unknown"


async def test_wrap_registered_functions_wraps_existing_handlers():
    harness = _harness("tool_gate")
    llm = _llm(("issue_refund", REFUND), ("issue_refund", REFUND))
    handler = Counting()
    llm.register_function("issue_refund", handler)
    harness.wrap_registered_functions(llm)
    assert llm._functions["issue_refund"].cancel_on_interruption is False
    await _run(llm)
    assert len(handler.calls) == 1


def _params(name: str, arguments: dict[str, Any], tool_call_id: str, sink: list[Any]) -> FunctionCallParams:
    async def callback(result: Any, *, properties: Any = None) -> None:
        sink.append(result)

    return FunctionCallParams(function_name=name, tool_call_id=tool_call_id, arguments=arguments, llm=None,
                              pipeline_worker=None, context=None, result_callback=callback)


async def test_call_from_an_interrupted_generation_is_not_executed_but_answered():
    harness = _harness("tool_gate")
    control = harness.control("tool_gate")
    assert isinstance(control, ToolGateControl)
    handler = Counting()
    gated = control.wrap_function("issue_refund", handler, write=True)
    answers: list[Any] = []
    control.guard.generation_started()
    control.guard.interrupted()  # the caller barged in before the call was issued
    await gated(_params("issue_refund", REFUND, "call_1", answers))
    assert handler.calls == [] and answers[0]["status"] == "not_executed"
    assert "interrupted" in answers[0]["reason"]
    control.guard.generation_started()  # the next generation is not interrupted
    await gated(_params("issue_refund", REFUND, "call_2", answers))
    assert len(handler.calls) == 1 and answers[1]["status"] == "refunded"


async def test_call_announced_before_the_interruption_still_runs():
    harness = _harness("tool_gate")
    control = harness.control("tool_gate")
    handler = Counting()
    gated = control.wrap_function("issue_refund", handler, write=True)
    call = FunctionCallFromLLM(function_name="issue_refund", tool_call_id="call_9", arguments=REFUND, context=None)
    await run_test(control.guard, frames_to_send=[FunctionCallsStartedFrame(function_calls=[call])])
    control.guard.interrupted()
    answers: list[Any] = []
    await gated(_params("issue_refund", REFUND, "call_9", answers))
    assert len(handler.calls) == 1


async def test_the_same_request_in_a_later_user_turn_is_not_executed_again():
    harness = _harness("tool_gate")
    control = harness.control("tool_gate")
    handler = Counting()
    gated = control.wrap_function("issue_refund", handler, write=True)
    answers: list[Any] = []
    await gated(_params("issue_refund", REFUND, "c1", answers))
    await gated(_params("issue_refund", REFUND, "c2", answers))
    harness._on_user_turn("refund it again please")
    await gated(_params("issue_refund", REFUND, "c3", answers))
    assert [a["status"] for a in answers] == ["refunded", "not_executed", "not_executed"]
    assert len(handler.calls) == 1
    assert [d.turn_id for d in harness.decisions.by_control("tool_gate")] == [0, 0, 1]


async def test_unknown_tool_is_recorded_and_every_decision_is_json():
    harness = _harness("tool_gate")
    control = harness.control("tool_gate")
    control.wrap_function("issue_refund", Counting(), write=True)
    call = FunctionCallFromLLM(function_name="delete_account", tool_call_id="x1", arguments={}, context=None)
    await run_test(control.guard, frames_to_send=[FunctionCallsStartedFrame(function_calls=[call])])
    (decision,) = harness.decisions.by_control("tool_gate")
    assert decision.action == "blocked" and decision.evidence["reason_kind"] == "unknown_tool"
    json.dumps(decision.to_dict())


async def test_ledger_from_config_is_created_on_first_write(tmp_path):
    config = HarnessConfig().only("tool_gate")
    config = config.model_copy(update={"tool_gate": config.tool_gate.model_copy(
        update={"ledger_url": f"sqlite+aiosqlite:///{tmp_path}/ledger.db"})})
    harness = Harness(config, call_id="ledger-call", write_tools={"issue_refund"})
    control = harness.control("tool_gate")
    handler = Counting()
    gated = control.wrap_function("issue_refund", handler, write=True)
    answers: list[Any] = []
    await asyncio.gather(*(gated(_params("issue_refund", REFUND, f"c{i}", answers)) for i in range(3)))
    assert len(handler.calls) == 1
    records = await control.ledger.records()
    assert [r.status for r in records] == ["succeeded"]
    await control.ledger.close()
