import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from pipecat_harness.tools import (
    ALREADY_DONE,
    GateStatus,
    OperationRefused,
    OperationStatus,
    PolicyRule,
    PolicySet,
    PolicyVerdict,
    Reconciliation,
    ToolGate,
    current_operation,
)


class Recorder:
    """A DecisionSink keeping decisions in a list."""

    def __init__(self) -> None:
        self.decisions: list[dict[str, Any]] = []

    def record(self, action: str, evidence: dict[str, Any]) -> dict[str, Any]:
        decision = {"action": action, "evidence": evidence, "outcome": None}
        self.decisions.append(decision)
        return decision

    def outcome(self, decision: dict[str, Any], outcome: dict[str, Any]) -> None:
        decision["outcome"] = outcome

    def actions(self) -> list[str]:
        return [d["action"] for d in self.decisions]


class Backend:
    """Counts executions; optionally fails, reports errors or hangs."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.keys: list[str | None] = []
        self.attempts: list[int] = []
        self.release = asyncio.Event()
        self.fail_next = 0
        self.refuse_next = 0
        self.hang = False

    async def refund(self, args: Mapping[str, Any]) -> Any:
        self.calls.append(dict(args))
        operation = current_operation()
        self.keys.append(operation.idempotency_key if operation else None)
        self.attempts.append(operation.attempt if operation else 0)
        if self.refuse_next:
            self.refuse_next -= 1
            raise OperationRefused("card declined")
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("refund service unavailable")
        if self.hang:
            await self.release.wait()
        return {"refund_id": len(self.calls), "status": "refunded"}

    async def lookup(self, args: Mapping[str, Any]) -> Any:
        self.calls.append(dict(args))
        return {"status": "delivered"}


REFUND = {"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged"}


@pytest.fixture
def backend() -> Backend:
    return Backend()


@pytest.fixture
def sink() -> Recorder:
    return Recorder()


@pytest.fixture
def gate(sink: Recorder) -> ToolGate:
    return ToolGate(write_tools={"issue_refund"}, decisions=sink, timeout_secs=0.2, late_reply_secs=1.0)


async def test_constructible_with_only_write_tool_names(backend):
    gate = ToolGate(write_tools={"issue_refund"})
    result = await gate.call("issue_refund", REFUND, backend.refund)
    assert result.status == GateStatus.EXECUTED and result.result["refund_id"] == 1


async def test_identical_write_in_same_turn_is_not_executed(gate, backend, sink):
    first = await gate.call("issue_refund", REFUND, backend.refund, tool_call_id="call_1")
    again = await gate.call("issue_refund", '{"reason": "damaged", "amount_usd": 45.0, "order_id": "#W2378156"}',
                            backend.refund, tool_call_id="call_2")
    assert first.status == "executed" and again.status == "not_executed"
    assert len(backend.calls) == 1
    assert again.reason == ALREADY_DONE == "not executed: this request was already done on this call"
    assert again.to_tool_result() == {"status": "not_executed", "reason": ALREADY_DONE,
                                      "previous_result": first.result}
    assert sink.actions() == ["forwarded", "not_executed"]
    assert sink.decisions[0]["outcome"] == {"status": "executed"}
    assert sink.decisions[1]["evidence"]["tool_call_id"] == "call_2"
    assert sink.decisions[1]["evidence"]["reason_kind"] == "duplicate"


async def test_parallel_identical_writes_execute_once(gate, backend):
    results = await asyncio.gather(*(gate.call("issue_refund", REFUND, backend.refund) for _ in range(3)))
    assert sorted(r.status for r in results) == ["executed", "not_executed", "not_executed"]
    assert len(backend.calls) == 1


async def test_the_same_request_in_a_later_turn_is_the_same_operation(gate, backend):
    first = await gate.call("issue_refund", REFUND, backend.refund)
    gate.new_turn()
    again = await gate.call("issue_refund", REFUND, backend.refund)
    assert again.status == "not_executed" and len(backend.calls) == 1
    assert again.idempotency_key == first.idempotency_key == backend.keys[0]


async def test_a_turn_scoped_tool_repeats_an_identical_request_in_a_new_turn(backend):
    gate = ToolGate(write_tools={"resend_code"}, scopes={"resend_code": "turn"})
    assert (await gate.call("resend_code", {"to": "+1555"}, backend.refund)).status == "executed"
    assert (await gate.call("resend_code", {"to": "+1555"}, backend.refund)).status == "not_executed"
    gate.new_turn()
    assert (await gate.call("resend_code", {"to": "+1555"}, backend.refund)).status == "executed"
    assert len(backend.calls) == 2 and backend.keys[0] != backend.keys[1]


async def test_a_definitive_failure_may_be_retried_under_the_same_key(gate, backend, sink):
    backend.refuse_next = 1
    failed = await gate.call("issue_refund", REFUND, backend.refund)
    assert failed.status == GateStatus.FAILED
    assert "card declined" in failed.reason
    assert failed.to_tool_result()["retry_allowed"] is True
    retried = await gate.call("issue_refund", REFUND, backend.refund)
    assert retried.status == "executed" and len(backend.calls) == 2
    assert backend.keys[0] == backend.keys[1]
    third = await gate.call("issue_refund", REFUND, backend.refund)
    assert third.status == "not_executed" and len(backend.calls) == 2
    assert sink.decisions[0]["outcome"]["status"] == "failed"


async def test_an_exception_is_ambiguous_and_never_retried_blindly(gate, backend):
    backend.fail_next = 1  # raised after the request may have reached the backend
    unknown = await gate.call("issue_refund", REFUND, backend.refund)
    assert unknown.status == GateStatus.OUTCOME_UNKNOWN and "refund service unavailable" in unknown.reason
    again = await gate.call("issue_refund", REFUND, backend.refund)
    assert again.status == GateStatus.OUTCOME_UNKNOWN and len(backend.calls) == 1


async def test_reported_error_counts_as_failure_and_permits_retry(gate):
    calls = []

    async def refund(args):
        calls.append(args)
        return {"error": "order not found"} if len(calls) == 1 else {"status": "refunded"}

    first = await gate.call("issue_refund", REFUND, refund)
    assert first.status == "failed" and first.to_tool_result()["result"] == {"error": "order not found"}
    assert (await gate.call("issue_refund", REFUND, refund)).status == "executed"


async def test_different_arguments_pass(gate, backend):
    await gate.call("issue_refund", REFUND, backend.refund)
    other = await gate.call("issue_refund", {**REFUND, "amount_usd": 20}, backend.refund)
    assert other.status == "executed" and len(backend.calls) == 2


async def test_reads_are_never_blocked_or_deduplicated(backend):
    rules = PolicySet([PolicyRule("no", lambda r: PolicyVerdict("block", "never"))])
    gate = ToolGate(write_tools={"issue_refund"}, policies=rules)
    results = [await gate.call("get_order_details", {"order_id": "#W1"}, backend.lookup) for _ in range(3)]
    assert [r.status for r in results] == ["executed"] * 3 and len(backend.calls) == 3
    assert (await gate.call("issue_refund", REFUND, backend.refund)).status == "blocked"


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [
        ('{"order_id": "#W1"', "malformed_json"),
        ("[1, 2]", "not_an_object"),
        ('{"order_id": "' + "x" * 20_000 + '"}', "too_large"),
        ({"amount_usd": float("inf"), "order_id": "#W1", "reason": "x"}, "invalid"),
        ({**REFUND, "tenant_id": "other-tenant"}, "server_context"),
    ],
)
async def test_bad_arguments_are_blocked_with_a_clear_result(sink, backend, arguments, kind):
    gate = ToolGate(write_tools={"issue_refund"}, decisions=sink, server_context={"tenant_id": "acme"})
    result = await gate.call("issue_refund", arguments, backend.refund)
    assert result.status == "blocked" and result.reason_kind == kind
    assert result.to_tool_result()["status"] == "blocked" and result.reason
    assert backend.calls == []
    assert sink.actions() == ["blocked"] and sink.decisions[0]["evidence"]["reason_kind"] == kind


async def test_schema_validation_and_unknown_tools(backend, sink):
    schema = {"type": "object", "properties": {"amount_usd": {"type": "number"}}, "required": ["amount_usd"]}
    gate = ToolGate(write_tools={"issue_refund"}, schemas={"issue_refund": schema}, decisions=sink)
    invalid = await gate.call("issue_refund", {"amount_usd": "lots"}, backend.refund)
    assert invalid.status == "blocked" and "amount_usd: 'lots' is not of type 'number'" in invalid.reason
    broken = ToolGate(write_tools={"issue_refund"}, schemas={"issue_refund": {"type": "amount"}}, decisions=sink)
    refused = await broken.call("issue_refund", {"amount_usd": 5}, backend.refund)
    assert refused.status == "blocked" and "parameters schema is not valid JSON Schema" in refused.reason
    unknown = await gate.call("delete_account", {}, backend.refund)
    assert unknown.status == "blocked" and unknown.reason_kind == "unknown_tool"
    assert backend.calls == []


async def test_server_context_reaches_the_handler_and_the_request_hash(backend):
    gate = ToolGate(write_tools={"issue_refund"}, server_context={"tenant_id": "acme"})
    await gate.call("issue_refund", REFUND, backend.refund, context={"customer_id": "c1"})
    assert backend.calls[0] == {**REFUND, "tenant_id": "acme", "customer_id": "c1"}
    other_customer = await gate.call("issue_refund", REFUND, backend.refund, context={"customer_id": "c2"})
    assert other_customer.status == "executed"


async def test_policy_block_warn_and_clarify(backend, sink):
    rules = PolicySet([
        PolicyRule("big", lambda r: PolicyVerdict("clarify", "confirm the amount")
                   if r.arguments["amount_usd"] > 100 else None, once_per_call=True),
        PolicyRule("note", lambda r: PolicyVerdict("warn", "refund noted")),
    ])
    gate = ToolGate(write_tools={"issue_refund"}, policies=rules, decisions=sink)
    asked = await gate.call("issue_refund", {**REFUND, "amount_usd": 500}, backend.refund)
    assert asked.status == "not_executed" and asked.reason_kind == "clarify" and "confirm" in asked.reason
    confirmed = await gate.call("issue_refund", {**REFUND, "amount_usd": 500}, backend.refund)
    assert confirmed.status == "executed" and confirmed.warnings == ("refund noted",)
    assert len(backend.calls) == 1
    assert sink.decisions[0]["evidence"]["policy"][0]["rule"] == "big"


async def test_handler_that_never_returns_is_outcome_unknown_and_never_retried_blindly(gate, backend, sink):
    backend.hang = True
    unknown = await gate.call("issue_refund", REFUND, backend.refund)
    assert unknown.status == GateStatus.OUTCOME_UNKNOWN and unknown.reason_kind == "timeout"
    assert "Do not repeat" in unknown.to_tool_result()["instruction"]
    again = await gate.call("issue_refund", REFUND, backend.refund)
    gate.new_turn()
    next_turn = await gate.call("issue_refund", REFUND, backend.refund)
    assert again.status == next_turn.status == GateStatus.OUTCOME_UNKNOWN
    assert len(backend.calls) == 1
    assert "outcome_unknown" in sink.actions()
    await gate.close()


async def test_late_reply_settles_an_unknown_outcome(sink):
    calls = []

    async def slow_refund(args):
        calls.append(args)
        await asyncio.sleep(0.3 if len(calls) == 1 else 0)
        return {"status": "refunded"}

    gate = ToolGate(write_tools={"issue_refund"}, decisions=sink, timeout_secs=0.1, late_reply_secs=2)
    assert (await gate.call("issue_refund", REFUND, slow_refund)).status == "outcome_unknown"
    await gate._late.wait()
    [settled] = gate.take_settled()  # what the model is told at its next turn
    assert settled.status == OperationStatus.SUCCEEDED and gate.take_settled() == []
    gate.new_turn()
    confirmed = await gate.call("issue_refund", REFUND, slow_refund)
    assert confirmed.status == "not_executed" and confirmed.reason == ALREADY_DONE
    assert confirmed.result == {"status": "refunded"} and len(calls) == 1
    assert "reconciled" in sink.actions()


@pytest.mark.parametrize(("truth", "voided", "expected_calls", "status"), [
    (OperationStatus.SUCCEEDED, None, 1, "not_executed"),
    (OperationStatus.FAILED, 1, 1, "outcome_unknown"),  # voided, but its handler still runs: its reply settles it
    (OperationStatus.FAILED, None, 1, "outcome_unknown"),  # "not found" alone is not "failed"
    (None, None, 1, "outcome_unknown"),
])
async def test_reconciler_decides_what_an_unknown_write_became(backend, truth, voided, expected_calls, status):
    asked = []

    async def reconciler(record):
        asked.append((record.idempotency_key, record.attempt))
        return None if truth is None else Reconciliation(truth, result={"refund_id": 1}, voided=voided)

    gate = ToolGate(write_tools={"issue_refund"}, timeout_secs=0.05, late_reply_secs=0.05, reconciler=reconciler)
    backend.hang = True
    await gate.call("issue_refund", REFUND, backend.refund)
    backend.hang = False
    result = await gate.call("issue_refund", REFUND, backend.refund)
    assert result.status == status and len(backend.calls) == expected_calls and asked[0][1] == 1
    if status == "executed":
        assert current_attempts(backend) == [1, 2]
    backend.release.set()
    await gate._late.wait()


def current_attempts(backend: Backend) -> list[int]:
    return backend.attempts


async def test_interrupted_generation_is_not_executed(gate, backend, sink):
    result = await gate.call("issue_refund", REFUND, backend.refund, should_proceed=lambda: False)
    assert result.status == "not_executed" and result.reason_kind == "interrupted" and backend.calls == []
    assert (await gate.call("issue_refund", REFUND, backend.refund)).status == "executed"


async def test_same_write_in_flight_from_an_earlier_turn_is_awaited_not_repeated(backend):
    gate = ToolGate(write_tools={"issue_refund"})
    release = asyncio.Event()

    async def slow(args):
        backend.calls.append(args)
        await release.wait()
        return {"status": "refunded"}

    first = asyncio.create_task(gate.call("issue_refund", REFUND, slow))
    await asyncio.sleep(0.01)
    gate.new_turn()  # the caller barged in and the model asks again
    second = asyncio.create_task(gate.call("issue_refund", REFUND, slow))
    await asyncio.sleep(0.01)
    release.set()
    assert (await first).status == "executed"
    repeated = await second
    assert repeated.status == "not_executed" and "already in progress" in repeated.reason
    assert len(backend.calls) == 1


async def test_cancelled_call_leaves_the_write_unknown_not_repeated(backend):
    gate = ToolGate(write_tools={"issue_refund"}, late_reply_secs=0)
    backend.hang = True
    task = asyncio.create_task(gate.call("issue_refund", REFUND, backend.refund))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    backend.hang = False
    again = await gate.call("issue_refund", REFUND, backend.refund)
    assert again.status == "outcome_unknown" and len(backend.calls) == 1


async def test_normalized_arguments_make_the_same_request_said_two_ways_a_duplicate(backend, sink):
    def canonical(args):
        args["order_id"] = "#" + str(args["order_id"]).upper().lstrip("#")
        return args

    gate = ToolGate(write_tools={"issue_refund"}, normalizers={"issue_refund": canonical}, decisions=sink)
    first = await gate.call("issue_refund", {**REFUND, "order_id": "w2378156"}, backend.refund)
    second = await gate.call("issue_refund", {**REFUND, "order_id": "#W2378156"}, backend.refund)
    assert first.status == GateStatus.EXECUTED and second.status == GateStatus.NOT_EXECUTED
    assert [call["order_id"] for call in backend.calls] == ["#W2378156"]  # the canonical form is what runs
    assert sink.decisions[0]["evidence"]["normalized_arguments"]["order_id"] == "#W2378156"


@pytest.mark.parametrize("normalizer", [lambda args: 1 / 0, lambda args: ["not", "a", "mapping"]])
async def test_a_failing_normalizer_blocks_the_call_clearly(backend, normalizer):
    gate = ToolGate(write_tools={"issue_refund"}, normalizers={"issue_refund": normalizer})
    result = await gate.call("issue_refund", REFUND, backend.refund)
    assert result.status == GateStatus.BLOCKED and "invalid arguments" in str(result.to_tool_result())
    assert backend.calls == []
