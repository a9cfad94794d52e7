"""An example policy rule for the retail demo, not active unless added: ``policies.add(large_refund_rule(100))``."""

from __future__ import annotations

from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest

__all__ = ["large_refund_rule"]


def large_refund_rule(threshold_usd: float = 100.0) -> PolicyRule:
    """Return a rule that asks the model to confirm refunds above ``threshold_usd`` once per call."""

    def check(request: ToolRequest) -> PolicyVerdict | None:
        try:
            amount = float(request.arguments.get("amount_usd", 0))
        except (TypeError, ValueError):
            return None
        reason = f"a refund of ${amount:,.2f} is above ${threshold_usd:,.2f}; read the amount back first"
        return PolicyVerdict("clarify", reason) if amount > threshold_usd else None

    return PolicyRule("large_refund_confirmation", check, tools=frozenset({"issue_refund"}), once_per_call=True)
