from __future__ import annotations

from typing import Any

from pipecat_harness.decisions import ControlDecision
from pipecat_harness.eval.tool_checks import canonical_request, measure_tool_checks
from pipecat_harness.trace.timeline import Timeline, TraceEvent

REFUND = {"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged"}


def _call(t: float, call_id: str, name: str, args: dict[str, Any], result: Any, error: str | None = None):
    return [TraceEvent(t, "tool", "tool_request", {"name": name, "tool_call_id": call_id, "arguments": args}),
            TraceEvent(t + 0.1, "tool", "tool_result",
                       {"name": name, "tool_call_id": call_id, "result": result, "error": error})]


def _refusal(call_id: str, kind: str, action: str = "not_executed") -> ControlDecision:
    return ControlDecision("tool_gate", action, {"tool_call_id": call_id, "reason_kind": kind})


def test_canonical_request_ignores_key_order_number_type_and_hash() -> None:
    a = canonical_request("issue_refund", {"order_id": "w2378156", "amount_usd": 45, "reason": "x"})
    b = canonical_request("issue_refund", {"reason": "x", "amount_usd": 45.0, "order_id": "#W2378156"})
    assert a == b
    assert a != canonical_request("issue_refund", {"order_id": "#W2378156", "amount_usd": 46, "reason": "x"})


def test_a_second_identical_write_that_executes_is_a_duplicate() -> None:
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, {"status": "refunded"})
                        + _call(1.01, "c2", "issue_refund", dict(REFUND, amount_usd=45.0), {"status": "refunded"}))
    figures = measure_tool_checks(timeline, [])
    assert (figures.write_requests, figures.duplicate_writes_executed, figures.duplicates_prevented) == (2, 1, 0)


def test_a_refused_duplicate_is_prevented() -> None:
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, {"status": "refunded"})
                        + _call(2, "c2", "issue_refund", REFUND, {"status": "not_executed"}))
    figures = measure_tool_checks(timeline, [_refusal("c2", "duplicate")])
    assert (figures.duplicate_writes_executed, figures.duplicates_prevented, figures.false_blocks) == (0, 1, 0)


def test_a_retry_after_a_failure_is_not_a_duplicate() -> None:
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, "failed", error="RuntimeError: down")
                        + _call(2, "c2", "issue_refund", REFUND, {"status": "refunded"}))
    assert measure_tool_checks(timeline, []).duplicate_writes_executed == 0
    gated = Timeline(_call(1, "c1", "issue_refund", REFUND, {"status": "failed", "retry_allowed": True})
                     + _call(2, "c2", "issue_refund", REFUND, {"status": "refunded"}))
    assert measure_tool_checks(gated, []).duplicate_writes_executed == 0


def test_refusals_that_are_not_duplicates_are_false_blocks_or_disallowed() -> None:
    other = dict(REFUND, order_id="#W7209932")
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, {"status": "refunded"})
                        + _call(2, "c2", "issue_refund", other, {"status": "not_executed"})
                        + _call(3, "c3", "cancel_pending_order", {"order_id": 5}, {"status": "blocked"}))
    figures = measure_tool_checks(timeline, [_refusal("c2", "duplicate"), _refusal("c3", "invalid", "blocked")])
    assert (figures.false_blocks, figures.disallowed_prevented, figures.duplicates_prevented) == (1, 1, 0)


def test_a_write_held_while_an_earlier_one_on_its_resource_is_unsettled_is_not_a_false_block() -> None:
    thursday = {"customer_id": "c-1", "day": "Thursday", "time": "10:00"}
    friday = dict(thursday, day="Friday")
    timeline = Timeline(_call(1, "c1", "schedule_callback", thursday, {"status": "outcome_unknown"})
                        + _call(2, "c2", "schedule_callback", friday, {"status": "not_executed"}))
    timed_out = ControlDecision("tool_gate", "outcome_unknown", {"tool_call_id": "c1", "reason_kind": "timeout"})
    figures = measure_tool_checks(timeline, [timed_out, _refusal("c2", "conflict")],
                                  write_tools=frozenset({"schedule_callback"}))
    assert (figures.held_until_settled, figures.false_blocks, figures.disallowed_prevented) == (1, 0, 0)


def test_a_write_that_timed_out_under_the_gate_still_executed() -> None:
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, {"status": "outcome_unknown"})
                        + _call(20, "c2", "issue_refund", REFUND, {"status": "refunded"}))
    timed_out = ControlDecision("tool_gate", "outcome_unknown", {"tool_call_id": "c1", "reason_kind": "timeout"})
    assert measure_tool_checks(timeline, [timed_out]).duplicate_writes_executed == 1


def test_lookups_and_follow_up_questions_are_counted() -> None:
    timeline = Timeline([*_call(1, "c1", "get_order_details", {"order_id": "#W2378156"}, {"status": "delivered"}),
                         TraceEvent(2, "model", "generated", {"text": "Shall I return the thermostat?"}),
                         TraceEvent(3, "model", "generated", {"text": "Done."})])
    figures = measure_tool_checks(timeline, [])
    assert (figures.lookups, figures.write_requests, figures.follow_up_questions) == (1, 0, 1)


def _forwarded(call_id: str, key: str) -> ControlDecision:
    return ControlDecision("tool_gate", "forwarded", {"tool_call_id": call_id, "idempotency_key": key})


def _reconciled(key: str, status: str) -> ControlDecision:
    return ControlDecision("tool_gate", "reconciled",
                           {"idempotency_key": key, "status": status, "source": "reconciler"})


def test_a_timed_out_write_reconciled_as_not_applied_did_not_execute() -> None:
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, {"status": "outcome_unknown"})
                        + _call(20, "c2", "issue_refund", REFUND, {"status": "refunded"}))
    decisions = [_forwarded("c1", "k1"),
                 ControlDecision("tool_gate", "outcome_unknown",
                                 {"tool_call_id": "c1", "idempotency_key": "k1", "reason_kind": "timeout"}),
                 _reconciled("k1", "failed"), _forwarded("c2", "k1")]
    figures = measure_tool_checks(timeline, decisions)
    assert (figures.write_requests, figures.duplicate_writes_executed, figures.false_blocks) == (2, 0, 0)


def test_a_write_that_failed_to_answer_but_was_settled_applied_makes_its_repeat_a_duplicate() -> None:
    timeline = Timeline(_call(1, "c1", "issue_refund", REFUND, None, error="TimeoutError: read timed out")
                        + _call(20, "c2", "issue_refund", REFUND, {"status": "refunded"}))
    decisions = [_forwarded("c1", "k1"), _reconciled("k1", "succeeded")]
    assert measure_tool_checks(timeline, decisions).duplicate_writes_executed == 1
    assert measure_tool_checks(timeline, [_forwarded("c1", "k1")]).duplicate_writes_executed == 0
