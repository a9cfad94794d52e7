from pipecat_harness.tools.policy import PolicyRule, PolicySet, PolicyVerdict, ToolRequest
from pipecat_harness.tools.retail_policy import large_refund_rule


def _request(amount: float, name: str = "issue_refund") -> ToolRequest:
    return ToolRequest(name, {"order_id": "#W1", "amount_usd": amount})


def test_no_rules_allows_everything():
    verdict, verdicts = PolicySet().evaluate(_request(10_000))
    assert verdict.action == "allow" and verdicts == []


def test_most_severe_verdict_wins_and_reasons_are_kept():
    rules = PolicySet([
        PolicyRule("note", lambda r: PolicyVerdict("warn", "large amount")),
        PolicyRule("limit", lambda r: PolicyVerdict("block", "over the limit")
                   if r.arguments["amount_usd"] > 100 else None),
    ])
    verdict, verdicts = rules.evaluate(_request(500))
    assert (verdict.action, verdict.reason, verdict.rule) == ("block", "over the limit", "limit")
    assert [v.action for v in verdicts] == ["warn", "block"]
    verdict, _ = rules.evaluate(_request(50))
    assert verdict.action == "warn"


def test_rules_switch_individually_and_apply_only_to_their_tools():
    rules = PolicySet([PolicyRule("limit", lambda r: PolicyVerdict("block", "no"), tools=frozenset({"issue_refund"}))])
    assert rules.evaluate(_request(1, name="cancel_pending_order"))[0].action == "allow"
    assert rules.evaluate(_request(1))[0].action == "block"
    rules.set_enabled("limit", False)
    assert rules.evaluate(_request(1))[0].action == "allow"


def test_once_per_call_rule_fires_only_once():
    rules = PolicySet([PolicyRule("confirm", lambda r: PolicyVerdict("clarify", "confirm first"), once_per_call=True)])
    assert rules.evaluate(_request(1))[0].action == "clarify"
    assert rules.evaluate(_request(1))[0].action == "allow"


def test_retail_example_rule_asks_once_for_large_refunds():
    rules = PolicySet([large_refund_rule(threshold_usd=100)])
    assert rules.evaluate(_request(45))[0].action == "allow"
    verdict, _ = rules.evaluate(_request(250))
    assert verdict.action == "clarify" and "250" in verdict.reason
    assert rules.evaluate(_request(250))[0].action == "allow"  # the caller confirmed; no second question
