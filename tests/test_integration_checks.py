"""Wiring mistakes that would leave an active control doing nothing are reported at start-up."""

from __future__ import annotations

import pytest
from loguru import logger
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams

from pipecat_harness import Harness, HarnessConfig
from pipecat_harness.sim.scenario import ModelScript
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SpeechLedger


async def lookup(params) -> None:
    await params.result_callback({"ok": True})


def _pipeline(harness: Harness, *, use_user_params: bool = True):
    llm = ScriptedLLMService(ModelScript())
    context = LLMContext(messages=[{"role": "system", "content": "hi"}])
    params = LLMUserAggregatorParams()
    pair = LLMContextAggregatorPair(context, user_params=harness.user_params(params) if use_user_params else params)
    transport = SimulatedOutputTransport(ledger=SpeechLedger(), sample_rate=16000)
    return llm, [pair.user(), llm, transport, pair.assistant()]


def _config() -> HarnessConfig:
    return HarnessConfig(trace={"enabled": False}).only("tool_gate", "identifier_hold")


@pytest.fixture
def errors():
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="ERROR")
    yield lines
    logger.remove(sink)


def test_a_declared_tool_registered_straight_on_the_llm_is_gated_at_place(errors) -> None:
    harness = Harness(HarnessConfig(trace={"enabled": False}, tool_gate={"write_tools": ["issue_refund"]})
                      .only("tool_gate", "identifier_hold"), strict=True)
    llm, processors = _pipeline(harness)
    llm.register_function("issue_refund", lookup)  # the harness never saw it registered
    harness.place(processors)
    assert errors == []
    assert getattr(llm._functions["issue_refund"].handler, "_harness_gated", False)


def test_tools_registered_before_the_harness_saw_the_llm_are_gated_once_it_does(errors) -> None:
    harness = Harness(HarnessConfig(trace={"enabled": False}, tool_gate={"write_tools": ["issue_refund"]})
                      .only("tool_gate", "identifier_hold"), strict=True)
    llm, processors = _pipeline(harness)
    llm.register_function("issue_refund", lookup)
    harness.wrap_registered_functions(llm)
    harness.place(processors)
    assert errors == []


def test_user_params_not_applied_is_reported(errors) -> None:
    harness = Harness(_config())
    llm, processors = _pipeline(harness, use_user_params=False)
    harness.register_function(llm, "lookup_order", lookup, write=False)
    harness.place(processors)
    assert len(errors) == 1 and "identifier_hold" in errors[0] and "harness.user_params(" in errors[0]


def test_a_tool_gate_with_no_tools_has_nothing_to_act_on(errors) -> None:
    harness = Harness(_config())
    _, processors = _pipeline(harness)
    harness.place(processors)
    assert len(errors) == 1 and "no registered tools" in errors[0] and "tool_gate" in errors[0]


def test_a_correctly_wired_harness_reports_nothing(errors) -> None:
    harness = Harness(_config(), strict=True)
    llm, processors = _pipeline(harness)
    harness.register_function(llm, "lookup_order", lookup, write=False)
    harness.place(processors)
    assert errors == []
