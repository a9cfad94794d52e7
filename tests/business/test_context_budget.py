"""The summary check restores what a lossy summary dropped, from the call state."""

from pipecat.processors.aggregators.llm_context import LLMContext

from pipecat_harness.business import WorkingStateKeeper
from pipecat_harness.business.context_budget import (
    KEPT_HEADER,
    SUMMARY_PROMPT,
    SummaryGuard,
    must_keep,
    summarization_config,
)


def keeper_with_history() -> WorkingStateKeeper:
    keeper = WorkingStateKeeper("c1")
    keeper.caller_turn(1, "I do not want this renewed.")
    keeper.caller_turn(2, "The refund must be under fifty dollars.")
    keeper.caller_turn(3, "What are your opening hours?")
    keeper.gate_decision("forwarded", {"tool": "issue_refund", "write": True, "idempotency_key": "k1",
                                       "tool_call_id": "call_1"}, {"status": "executed"}, 2)
    return keeper


def test_must_keep_lists_refusals_constraints_and_operations_not_small_talk():
    items = must_keep(keeper_with_history().state)
    kinds = {(i.kind, i.needle) for i in items}
    assert ("correction", "I do not want this renewed.") in kinds
    assert ("constraint", "The refund must be under fifty dollars.") in kinds
    assert ("operation", "op-1") in kinds
    assert not any("opening hours" in i.text for i in items)


def test_guard_restores_only_what_the_summary_and_recent_messages_lost():
    keeper = keeper_with_history()
    summary = {"role": "user", "content": "Summary of the earlier call (older messages were compressed):\n"
                                          "The caller discussed renewal. Refund op-1 done."}
    recent = {"role": "user", "content": "The refund must be under fifty dollars."}
    context = LLMContext(messages=[{"role": "system", "content": "sys"}, summary, recent])
    checked = []
    guard = SummaryGuard(context, lambda: keeper.state, on_checked=lambda k, r: checked.append((k, r)))
    restored = guard.check()
    assert [i.needle for i in restored] == ["I do not want this renewed."]
    assert context.get_messages()[1] is summary  # edited in place: Pipecat tracks it by identity
    assert KEPT_HEADER in summary["content"] and '"I do not want this renewed."' in summary["content"]
    assert guard.check() == []  # a second check finds nothing missing


def test_config_carries_the_prompt_and_the_budget():
    config = summarization_config(max_context_tokens=900, max_unsummarized_messages=12, keep_recent_messages=3)
    assert config.max_context_tokens == 900 and config.max_unsummarized_messages == 12
    assert config.summary_config.summarization_prompt == SUMMARY_PROMPT
    assert config.summary_config.min_messages_after_summary == 3
    for heading in ("CONSTRAINTS", "CORRECTIONS AND REFUSALS", "UNRESOLVED QUESTIONS", "OPERATIONS"):
        assert heading in SUMMARY_PROMPT
