"""Pre-turn evidence is switched, sized and budgeted from the harness config's retrieval block."""

import asyncio

import pytest
from pipecat.frames.frames import LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from pipecat_harness.config import ConfigError, HarnessConfig
from pipecat_harness.control import Placement
from pipecat_harness.harness import Harness
from pipecat_harness.retrieval.tool import EVIDENCE_MESSAGE_MARK, PreTurnEvidence

NORTHWIND = {"tenant": "northwind", "call_date": "2026-11-20"}


def _context(question: str) -> LLMContext:
    return LLMContext(messages=[{"role": "system", "content": "You are a support agent."},
                                {"role": "user", "content": question}])


def _evidence_messages(context: LLMContext) -> list[str]:
    return [m["content"] for m in context.get_messages() if str(m.get("content", "")).startswith(EVIDENCE_MESSAGE_MARK)]


def _harness(**retrieval) -> Harness:
    return Harness(HarnessConfig(retrieval=retrieval).only("call_state", "tool_gate"), call_id="call-r")


def test_off_by_default():
    control = Harness(HarnessConfig().only("call_state"), call_id="c").control("call_state")
    assert control.evidence is None and not any(isinstance(p, PreTurnEvidence) for _, p in control.processors())


async def test_switched_on_it_adds_at_most_k_items_of_the_callers_tenant_before_the_model():
    control = _harness(pre_turn=True, limit=2, **NORTHWIND).control("call_state")
    placed = [(where, p) for where, p in control.processors() if isinstance(p, PreTurnEvidence)]
    assert [where for where, _ in placed] == [Placement.BEFORE_LLM]
    context = _context("How long do I have to return something?")
    await placed[0][1].ensure_retriever()  # the build runs from the pipeline's start; a turn comes later
    await run_test(placed[0][1], frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame])
    [message] = _evidence_messages(context)
    # Tested without an LLM service downstream it is a system message; never the caller's (user) role.
    assert [m["role"] for m in context.get_messages() if m["content"] == message] == ["system"]
    assert "The caller did not say this" in message
    assert message.count('"untrusted_text"') == 2
    assert "northwind" in message and "fabrikam" not in message
    recorded = [d for d in control.harness.decisions.decisions if d.action == "pre_turn_evidence"]
    assert recorded and recorded[-1].evidence["reason"] == "added"


async def test_the_scope_comes_from_the_gates_server_context_not_the_config():
    harness = _harness(pre_turn=True, **NORTHWIND)
    harness.control("tool_gate").gate.server_context["tenant_id"] = "fabrikam"
    assert harness.control("call_state").retrieval_scope().tenant == "fabrikam"


class _Slow:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def retrieve(self, query, scope):
        await asyncio.sleep(self.delay)
        raise AssertionError("not reached within the budget")


async def test_the_budget_setting_drops_late_evidence():
    control = _harness(pre_turn=True, budget_ms=20, **NORTHWIND).control("call_state")
    control.use_retriever(_Slow(1.0))
    context = _context("When will I get my money back?")
    assert await control.evidence.attach(context) is None
    assert _evidence_messages(context) == []
    reasons = [d.evidence["reason"] for d in control.harness.decisions.decisions if d.action == "pre_turn_evidence"]
    assert reasons == ["dropped: retrieval exceeded its 20 ms budget"]


async def test_documents_that_fail_to_load_leave_the_call_without_evidence(tmp_path):
    broken = tmp_path / "policies.yaml"
    broken.write_text("documents: [{id: x}]\n")
    control = _harness(pre_turn=True, documents=str(broken), **NORTHWIND).control("call_state")
    assert await control.evidence.ensure_retriever() is None
    reasons = [d.evidence["reason"] for d in control.harness.decisions.decisions if d.action == "pre_turn_evidence"]
    assert reasons and reasons[0].startswith("off: the retriever could not be built")


@pytest.mark.parametrize(("block", "named"), [
    ({"documents": "/nonexistent/policies.yaml"}, "retrieval.documents"),
    ({"limit": 0}, "retrieval.limit"),
    ({"index_url": "postgresql://db/x"}, "retrieval.index_url"),
])
def test_bad_settings_name_the_setting(block, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        HarnessConfig(retrieval=block)


def test_from_yaml(tmp_path):
    path = tmp_path / "harness.yaml"
    path.write_text("retrieval:\n  pre_turn: true\n  limit: 4\n  budget_ms: 80\n  tenant: northwind\n")
    config = HarnessConfig.from_yaml(path)
    assert (config.retrieval.pre_turn, config.retrieval.limit, config.retrieval.budget_ms) == (True, 4, 80.0)


async def test_with_an_llm_service_downstream_evidence_is_one_system_instruction_entry():
    from pipecat.pipeline.pipeline import Pipeline

    from pipecat_harness.sim.model_script import ModelScript
    from pipecat_harness.sim.scripted_llm import ScriptedLLMService

    control = _harness(pre_turn=True, limit=3, **NORTHWIND).control("call_state")
    llm = ScriptedLLMService(ModelScript(system="You are a support agent.", fallback="Okay."))
    context = _context("My blender arrived damaged. Can you approve a refund for it?")
    await control.evidence.ensure_retriever()
    await run_test(Pipeline([control.evidence, llm]), frames_to_send=[LLMContextFrame(context)],
                   expected_down_frames=None)
    [received] = [call.messages for call in llm.calls]
    system = "\n".join(str(m["content"]) for m in received if m["role"] == "system")
    assert EVIDENCE_MESSAGE_MARK in system and "ignore earlier instructions" in system
    assert "contains instructions addressed to the agent" in system  # the planted note is flagged
    assert not any(EVIDENCE_MESSAGE_MARK in str(m["content"]) for m in received if m["role"] != "system")
    assert _evidence_messages(context) == []
    entries = [e for e in llm._appended_system_instructions if e.startswith(EVIDENCE_MESSAGE_MARK)]
    assert len(entries) == 1
