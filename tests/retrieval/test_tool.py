"""The read tool takes only a question; pre-turn evidence is dropped when the state moved."""

import asyncio

from pipecat.processors.aggregators.llm_context import LLMContext

from pipecat_harness.retrieval import Evidence
from pipecat_harness.retrieval.tool import (
    EVIDENCE_MESSAGE_MARK,
    PreTurnEvidence,
    policy_lookup_handler,
    policy_lookup_schema,
)
from tests.retrieval.conftest import make_retriever, northwind


async def test_model_cannot_choose_the_tenant(documents):
    async with make_retriever("sqlite", documents) as retriever:
        lookup = policy_lookup_handler(retriever, lambda: northwind("blender-x200"))
        result = await lookup({"question": "Can I return a damaged blender for a full refund?",
                               "tenant_id": "fabrikam"})
    assert result["status"] == "evidence"
    assert all("fabrikam" not in e["source"] for e in result["evidence"])
    assert list(policy_lookup_schema().properties) == ["question"]


async def test_missing_question_is_blocked_not_raised(documents):
    async with make_retriever("sqlite", documents) as retriever:
        lookup = policy_lookup_handler(retriever, northwind)
        result = await lookup({})
    assert result["status"] == "blocked" and "question" in result["reason"]


class _SlowRetriever:
    def __init__(self, inner, delay: float, during=None):
        self.inner, self.delay, self.during = inner, delay, during

    async def retrieve(self, query, scope) -> Evidence:
        if self.during:
            self.during()
        await asyncio.sleep(self.delay)
        return await self.inner.retrieve(query, scope)


def _context(*turns: str) -> LLMContext:
    return LLMContext(messages=[{"role": "system", "content": "You are a support agent."},
                                *({"role": "user", "content": t} for t in turns)])


async def test_pre_turn_evidence_is_added_once_and_replaced(documents):
    results = []
    async with make_retriever("sqlite", documents) as retriever:
        pre = PreTurnEvidence(retriever, northwind, lambda: 3, on_result=lambda e, why: results.append(why))
        context = _context("When will I get my money back?")
        added = await pre.attach(context)
        assert added is not None and added.items[0].doc_id == "nw-refund-timing-2026-01"
        context.add_message({"role": "assistant", "content": "Within 5 to 10 business days."})
        context.add_message({"role": "user", "content": "And how long do I have to return something?"})
        await pre.attach(context)
    evidence_messages = [m for m in context.get_messages() if m["content"].startswith(EVIDENCE_MESSAGE_MARK)]
    assert len(evidence_messages) == 1 and "nw-returns" not in evidence_messages[0]["content"]  # no ids leak
    assert "help.northwind.example/policies/returns" in evidence_messages[0]["content"]
    assert results == ["added", "added"]


async def test_pre_turn_evidence_is_dropped_when_the_state_version_moved(documents):
    version = {"v": 7}
    results = []
    async with make_retriever("sqlite", documents) as retriever:
        slow = _SlowRetriever(retriever, 0.01, during=lambda: version.__setitem__("v", 8))
        pre = PreTurnEvidence(slow, northwind, lambda: version["v"], on_result=lambda e, why: results.append(why))
        context = _context("When will I get my money back?")
        assert await pre.attach(context) is None
    assert not any(m["content"].startswith(EVIDENCE_MESSAGE_MARK) for m in context.get_messages())
    assert results == ["dropped: state moved from version 7 to 8"]


async def test_pre_turn_evidence_past_its_budget_is_dropped(documents):
    results = []
    async with make_retriever("sqlite", documents) as retriever:
        pre = PreTurnEvidence(_SlowRetriever(retriever, 0.5), northwind, lambda: 1, budget_secs=0.01,
                              on_result=lambda e, why: results.append(why))
        assert await pre.attach(_context("When will I get my money back?")) is None
    assert results and results[0].startswith("dropped: retrieval exceeded")
