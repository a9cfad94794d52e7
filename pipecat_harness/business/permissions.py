"""Permissions tied to the caller's verified state: some writes run only after identity is verified.

Read and write are separate permissions (the gate never blocks reads), and a
write on an account can additionally require a trusted result that verified
the caller (an identity lookup that succeeded). The model cannot claim
verification: only the call state, filled from tool results, says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest

__all__ = ["identity_rule"]


def identity_rule(verified: Callable[[], bool], tools: Iterable[str], *, name: str = "identity_verified") -> PolicyRule:
    """A gate rule asking for identity verification before the listed writes.

    Args:
        verified: Returns whether the call state holds a verified identity.
        tools: The writes that need it.
        name: Rule name.
    """

    def check(request: ToolRequest) -> PolicyVerdict | None:
        if verified():
            return None
        return PolicyVerdict("clarify", f"{request.name} changes the caller's account: verify the caller's "
                                        "identity first (look them up by email, or by name and zip code)")

    return PolicyRule(name, check, tools=frozenset(tools))
