"""What the model receives for a gated call is the operation record's rendering, the same for every provider."""

import json
from pathlib import Path

import pytest

from pipecat_harness.business.tool_results import render_operation_result, user_safe_fields
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario
from pipecat_harness.tools.gate import ToolGate
from pipecat_harness.tools.ledger import OperationLedger
from pipecat_harness.tools.policy import PolicyRule, PolicySet, PolicyVerdict
from pipecat_harness.trace.timeline import Timeline

BACKEND_ROW = {
    "refund_id": "R-1", "amount_usd": 45, "status": "refunded",
    "tenant_id": "northwind", "_row_version": 7, "idempotency_key": "k", "internal_notes": "manual review skipped",
    "card": {"card_number": "4111111111111111", "last4": "1111"},
}


def _safe(body):
    text = json.dumps(body)
    for leaked in ("northwind", "_row_version", "idempotency_key", "manual review", "4111111111111111"):
        assert leaked not in text, f"{leaked} reached the model: {text}"


async def _gate(tmp_path, handler_result, *, policies=None):
    ledger = OperationLedger(f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}")
    await ledger.create_tables()
    gate = ToolGate(write_tools={"issue_refund"}, read_tools={"get_order"}, ledger=ledger, session_id="call-1",
                    policies=policies)
    calls = []

    async def handler(arguments):
        calls.append(dict(arguments))
        if isinstance(handler_result, BaseException):
            raise handler_result
        return handler_result

    return gate, ledger, handler, calls


async def test_a_write_that_ran_shows_succeeded_the_ledger_key_and_user_safe_fields_only(tmp_path):
    gate, ledger, handler, _ = await _gate(tmp_path, BACKEND_ROW)
    result = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, handler)
    body = render_operation_result(result)
    record = await ledger.get("default", result.idempotency_key)
    assert body["status"] == "succeeded" == record.status
    assert body["operation_id"] == record.idempotency_key
    assert body["result"] == {"refund_id": "R-1", "amount_usd": 45, "status": "refunded", "card": {"last4": "1111"}}
    _safe(body)

    again = render_operation_result(await gate.call("issue_refund", {"amount_usd": 45.0, "order_id": "#W1"}, handler))
    assert again["status"] == "not_executed" and again["already_done"] is True
    assert again["operation_id"] == record.idempotency_key and again["previous_result"]["refund_id"] == "R-1"
    _safe(again)
    await ledger.close()


@pytest.mark.parametrize(("outcome", "status"), [
    ({"error": "card declined", "tenant_id": "northwind"}, "failed"),
    (ConnectionResetError("reply lost"), "outcome_unknown"),
])
async def test_failed_and_unknown_writes_say_so_explicitly(tmp_path, outcome, status):
    gate, ledger, handler, _ = await _gate(tmp_path, outcome)
    result = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, handler)
    body = render_operation_result(result)
    record = await ledger.get("default", result.idempotency_key)
    assert body["status"] == status == record.status, (body, record)
    assert body["operation_id"] == record.idempotency_key
    if status == "failed":
        assert body["retry_allowed"] is True and body["result"] == {"error": "card declined"}
    else:
        assert "Do not repeat" in body["instruction"]
    _safe(body)
    await ledger.close()


async def test_blocked_not_executed_and_awaiting_confirmation(tmp_path):
    rules = PolicySet([PolicyRule("cap", lambda r: PolicyVerdict("block", "over the refund limit")
                                  if r.arguments.get("amount_usd", 0) > 500 else None)])
    gate, ledger, handler, calls = await _gate(tmp_path, BACKEND_ROW, policies=rules)
    blocked = render_operation_result(await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 900}, handler))
    assert blocked["status"] == "blocked" and "refund limit" in blocked["reason"]
    malformed = render_operation_result(await gate.call("issue_refund", "{not json", handler))
    assert malformed["status"] == "blocked"
    interrupted = render_operation_result(await gate.call("issue_refund", {"order_id": "#W2", "amount_usd": 5},
                                                          handler, should_proceed=lambda: False))
    assert interrupted["status"] == "not_executed" and "interrupted" in interrupted["reason"]

    gate.policies.add(PolicyRule("confirm", lambda r: PolicyVerdict("clarify", "proposal-3 awaits")))
    held = await gate.call("issue_refund", {"order_id": "#W3", "amount_usd": 5}, handler)
    body = render_operation_result(held, proposal_id="proposal-3")
    assert body["status"] == "awaiting_confirmation" and body["operation_id"] == "proposal-3"
    assert render_operation_result(held)["status"] == "not_executed"  # no proposal behind it: plainly not done
    assert calls == []
    await ledger.close()


async def test_a_read_has_a_status_and_no_operation_id(tmp_path):
    gate, ledger, handler, _ = await _gate(tmp_path, json.dumps(BACKEND_ROW))  # a handler returning JSON text
    body = render_operation_result(await gate.call("get_order", {"order_id": "#W1"}, handler))
    assert body["status"] == "succeeded" and "operation_id" not in body
    assert body["result"]["refund_id"] == "R-1"
    _safe(body)
    await ledger.close()


def test_user_safe_fields_filters_at_any_depth_and_bounds_lists():
    value = {"items": [{"sku": i, "_cost": 1, "api_key": "x"} for i in range(80)], "session_token": "t"}
    safe = user_safe_fields(value, hidden=())
    assert len(safe["items"]) == 50 and safe["items"][0] == {"sku": 0} and "session_token" not in safe


def _provider_tool_results(timeline: Timeline, provider: str) -> list[dict]:
    """The tool results in the last request the provider's loopback fake received."""
    requests = [e.data["payload"] for e in timeline.of(f"{provider}_received") if e.data.get("message") == "request"]
    last = requests[-1]
    if provider == "gemini":
        return [part["functionResponse"]["response"] for content in last["contents"] for part in content["parts"]
                if "functionResponse" in part]
    return [json.loads(m["content"]) for m in last["messages"] if m["role"] == "tool"]


def test_gemini_and_openai_receive_the_same_rendering(tmp_path):
    scenario = load_scenario(Path(BUNDLED_DIR) / "business_callback_corrected_before_execution.yaml")
    seen = {}
    for services, provider in (("loopback", "gemini"), ("loopback-openai", "openai")):
        result = run_scenario(scenario, services=services, trace_dir=tmp_path / provider)
        assert result.as_expected, result.checks
        seen[provider] = _provider_tool_results(Timeline.load(result.trace_path), provider)
    assert seen["gemini"] == seen["openai"]
    statuses = [(body["status"], body.get("operation_id")) for body in seen["openai"]]
    assert statuses[0] == ("awaiting_confirmation", "proposal-1")
    assert ("awaiting_confirmation", "proposal-2") in statuses  # the correction replaced the proposal
    assert statuses[-1][0] == "succeeded" and statuses[-1][1].startswith("op-")
    assert seen["openai"][-1]["result"]["day"] == "Friday"
