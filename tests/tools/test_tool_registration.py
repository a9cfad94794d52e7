"""Every tool is gated however it is registered, and Pipecat's result properties pass through unchanged.

Each test runs Pipecat's own LLMService function-calling code (the scripted
LLM subclasses it) and counts how often the business handler ran.
"""

from typing import Any

import pytest
from pipecat.adapters.schemas.function_schema import FunctionSchema
from pipecat.adapters.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import FunctionCallResultFrame, FunctionCallResultProperties, LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import Harness
from pipecat_harness.sim.scenario import ModelDecision, ModelScript, ToolCallSpec
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.tools.control import UndeclaredTool

REFUND = {"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged"}


def _harness(**kwargs: Any) -> Harness:
    return Harness(HarnessConfig().only("tool_gate"), call_id="reg-call", **kwargs)


def _llm(*calls: tuple[str, dict[str, Any]]) -> ScriptedLLMService:
    script = ModelScript(first_token_secs=0, token_secs=0, decisions=[
        ModelDecision(tool_calls=[ToolCallSpec(name=name, args=args) for name, args in calls])])
    return ScriptedLLMService(script)


async def _run(llm: ScriptedLLMService, tools: Any = None) -> list[FunctionCallResultFrame]:
    context = LLMContext(messages=[{"role": "user", "content": "refund please"}], **({"tools": tools} if tools else {}))
    down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=0.2)])
    return [f for f in down if isinstance(f, FunctionCallResultFrame)]


applied: list[dict[str, Any]] = []


async def issue_refund(params: FunctionCallParams, order_id: str, amount_usd: float, reason: str):
    """Refund an amount on an order.

    Args:
        order_id: The order.
        amount_usd: The amount.
        reason: Why.
    """
    applied.append({"order_id": order_id})
    await params.result_callback({"status": "refunded"})


@pytest.fixture(autouse=True)
def _clear() -> None:
    applied.clear()


async def test_direct_function_tools_registered_at_the_first_model_run_are_gated():
    harness = _harness(write_tools={"issue_refund"})
    llm = _llm(("issue_refund", REFUND), ("issue_refund", REFUND))
    tools = ToolsSchema(standard_tools=[issue_refund])
    harness.wrap_registered_functions(llm, tools=tools)
    results = await _run(llm, tools)
    assert len(applied) == 1
    assert sorted(r.result["status"] for r in results) == ["not_executed", "refunded"]


async def test_function_schema_handlers_are_gated():
    async def handler(params: FunctionCallParams) -> None:
        applied.append(dict(params.arguments))
        await params.result_callback({"status": "refunded"})

    schema = FunctionSchema(name="issue_refund", description="Refund.", properties={}, required=[], handler=handler)
    harness = _harness(write_tools={"issue_refund"})
    llm = _llm(("issue_refund", REFUND), ("issue_refund", REFUND))
    tools = ToolsSchema(standard_tools=[schema])
    harness.wrap_registered_functions(llm, tools=tools)
    await _run(llm, tools)
    assert len(applied) == 1


async def test_tools_registered_directly_on_the_llm_after_attaching_are_gated():
    async def handler(params: FunctionCallParams) -> None:
        applied.append(dict(params.arguments))
        await params.result_callback({"status": "refunded"})

    harness = _harness(write_tools={"issue_refund"})
    llm = _llm(("issue_refund", REFUND), ("issue_refund", REFUND))
    harness.wrap_registered_functions(llm)
    llm.register_function("issue_refund", handler)  # added later, straight on the service
    await _run(llm)
    assert len(applied) == 1


async def test_registering_then_wrapping_again_is_harmless():
    async def handler(params: FunctionCallParams) -> None:
        applied.append(dict(params.arguments))
        await params.result_callback({"status": "refunded"})

    harness = _harness()
    llm = _llm(("issue_refund", REFUND))
    harness.register_function(llm, "issue_refund", handler, write=True)
    harness.wrap_registered_functions(llm)
    harness.wrap_registered_functions(llm)
    [result] = await _run(llm)
    assert result.result == {"status": "refunded"} and len(applied) == 1


async def test_run_llm_false_and_on_context_updated_reach_pipecat_unchanged():
    updated: list[str] = []

    async def on_context_updated() -> None:
        updated.append("yes")

    properties = FunctionCallResultProperties(run_llm=False, on_context_updated=on_context_updated)

    async def end_call(params: FunctionCallParams) -> None:
        applied.append({})
        await params.result_callback({"status": "ended"}, properties=properties)

    harness = _harness()
    llm = _llm(("end_call", {}))
    harness.register_function(llm, "end_call", end_call, write=True)
    [result] = await _run(llm)
    assert result.result == {"status": "ended"}
    assert result.properties is properties
    assert result.properties.run_llm is False and result.properties.on_context_updated is on_context_updated


def test_a_tool_declared_neither_read_nor_write_is_refused_at_start_up():
    async def handler(params: FunctionCallParams) -> None:
        pass

    harness = _harness()
    llm = _llm(("mystery", {}))
    with pytest.raises(UndeclaredTool, match="'mystery' is declared neither a read nor a write"):
        harness.register_function(llm, "mystery", handler)
    with pytest.raises(UndeclaredTool, match="'issue_refund' is declared neither a read nor a write"):
        harness.wrap_registered_functions(llm, tools=ToolsSchema(standard_tools=[issue_refund]))
    harness.register_function(llm, "lookup", handler, write=False)  # declared: fine


async def test_an_undeclared_tool_appearing_mid_call_is_blocked_not_run():
    harness = _harness()
    llm = _llm(("issue_refund", REFUND))
    harness.wrap_registered_functions(llm)
    tools = ToolsSchema(standard_tools=[issue_refund])  # advertised only at run time, never declared
    [result] = await _run(llm, tools)
    assert result.result["status"] == "blocked" and applied == []
