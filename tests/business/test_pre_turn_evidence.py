"""Pre-turn evidence is switched, sized and budgeted from the harness config's retrieval block."""

import asyncio
import datetime as dt
import threading
import time

import pytest
from pipecat.frames.frames import LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from pipecat_harness.config import ConfigError, HarnessConfig
from pipecat_harness.control import Placement
from pipecat_harness.harness import Harness
from pipecat_harness.retrieval import RetrievalScope, clear_prepared
from pipecat_harness.retrieval.tool import EVIDENCE_MESSAGE_MARK, PreTurnEvidence

NORTHWIND = {"tenant": "northwind", "call_date": "2026-11-20"}
#: A budget for tests about what evidence holds, not about timing (a shared test machine's first query is slow).
ROOMY = {"budget_ms": 2000}


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
    control = _harness(pre_turn=True, limit=2, **ROOMY, **NORTHWIND).control("call_state")
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

    control = _harness(pre_turn=True, limit=3, **ROOMY, **NORTHWIND).control("call_state")
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


def _index_threads() -> set[threading.Thread]:
    """The live worker threads of aiosqlite connections (one per open in-memory lexical index)."""
    return {t for t in threading.enumerate() if t.is_alive() and "_connection_worker_thread" in t.name}


async def test_a_turn_before_the_retriever_is_built_goes_on_without_evidence_and_the_end_cancels_the_build():
    cancelled: list[bool] = []

    async def slow_build():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    reasons: list[str] = []
    evidence = PreTurnEvidence(None, lambda: RetrievalScope("northwind", (), dt.date(2026, 11, 20)), lambda: 0,
                               budget_secs=0.02, on_result=lambda _e, reason: reasons.append(reason),
                               build=slow_build)
    context = _context("How long do I have to return something?")
    started = time.monotonic()
    await run_test(evidence, frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame])
    assert time.monotonic() - started < 5  # neither the start nor the turn waited for the 30 s build
    assert reasons == ["dropped: retriever still building"]
    assert _evidence_messages(context) == []
    assert cancelled == [True] and not evidence.building and evidence.retriever is None


async def test_the_configured_build_runs_off_the_frame_path_with_embeddings_on():
    clear_prepared()  # a cold process: the documents are embedded again (seconds), far beyond a 20 ms budget
    harness = _harness(pre_turn=True, budget_ms=20, **NORTHWIND)
    assert harness.config.retrieval.embeddings  # the default
    control = harness.control("call_state")
    context = _context("My parcel came smashed, what can I do?")
    await run_test(control.evidence, frames_to_send=[LLMContextFrame(context)],
                   expected_down_frames=[LLMContextFrame])
    reasons = [d.evidence["reason"] for d in harness.decisions.decisions if d.action == "pre_turn_evidence"]
    assert reasons == ["dropped: retriever still building"]


async def test_with_embeddings_on_a_paraphrase_sharing_no_word_finds_its_policy():
    control = _harness(pre_turn=True, limit=3, **ROOMY, **NORTHWIND).control("call_state")
    retriever = await control.evidence.ensure_retriever()
    assert retriever is not None and retriever.vectors is not None
    context = _context("The thing I bought showed up smashed to bits")
    await run_test(control.evidence, frames_to_send=[LLMContextFrame(context)],
                   expected_down_frames=[LLMContextFrame])
    [message] = _evidence_messages(context)
    assert "policies/damaged-items" in message


async def test_the_pipelines_end_closes_the_retriever_it_built():
    before = _index_threads()
    control = _harness(pre_turn=True, **NORTHWIND).control("call_state")
    await control.evidence.ensure_retriever()
    opened = _index_threads() - before
    assert opened  # the call's lexical index holds a connection thread
    await run_test(control.evidence, frames_to_send=[LLMContextFrame(_context("Can I return it?"))],
                   expected_down_frames=[LLMContextFrame])
    for thread in opened:
        await asyncio.to_thread(thread.join, 5)
    assert not any(t.is_alive() for t in opened)
    assert control.evidence.retriever is None


async def test_harness_close_closes_the_retriever_it_built():
    before = _index_threads()
    harness = _harness(pre_turn=True, **NORTHWIND)
    await harness.control("call_state").evidence.ensure_retriever()
    opened = _index_threads() - before
    assert opened
    harness.close()  # synchronous: the close runs on the call's loop
    for thread in opened:
        await asyncio.to_thread(thread.join, 5)
    assert not any(t.is_alive() for t in opened)


def test_harness_close_after_the_calls_loop_ended_still_closes_the_retriever():
    before = _index_threads()
    harness = _harness(pre_turn=True, **NORTHWIND)
    asyncio.run(harness.control("call_state").evidence.ensure_retriever())
    opened = _index_threads() - before
    assert opened
    harness.close()  # no loop is running: the index is closed on a short-lived one
    for thread in opened:
        thread.join(5)
    assert not any(t.is_alive() for t in opened)
