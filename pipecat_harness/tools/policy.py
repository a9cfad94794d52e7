"""Policy checks run before a write is forwarded (none is active by default).

A rule looks at one proposed call and answers ``allow``, ``warn``, ``block`` or ``clarify`` with a reason; it may be
switched, limited to tools, or fire once per call (confirm a large refund once, then let it through).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["PolicyAction", "PolicyRule", "PolicySet", "PolicyVerdict", "ToolRequest"]

PolicyAction = Literal["allow", "warn", "block", "clarify"]

_SEVERITY: dict[str, int] = {"allow": 0, "warn": 1, "clarify": 2, "block": 3}


@dataclass(frozen=True)
class ToolRequest:
    """A proposed tool call as policies see it (``arguments``: validated, server context included)."""

    name: str
    arguments: Mapping[str, Any]
    turn_id: int = 0
    write: bool = True


@dataclass(frozen=True)
class PolicyVerdict:
    """A rule's answer: ``warn`` forwards, noting why; ``block`` never forwards; ``clarify`` asks the caller first."""

    action: PolicyAction = "allow"
    reason: str = ""
    rule: str = ""


@dataclass
class PolicyRule:
    """One switchable rule for calls of ``tools`` (``None``: every write); ``check`` returning ``None`` allows.

    With ``once_per_call`` it fires at most once per call; later matches are allowed.
    """

    name: str
    check: Callable[[ToolRequest], PolicyVerdict | None]
    tools: frozenset[str] | None = None
    enabled: bool = True
    once_per_call: bool = False
    fired: int = field(default=0, init=False)

    def applies_to(self, tool: str) -> bool:
        """Whether the rule looks at calls of ``tool``."""
        return self.tools is None or tool in self.tools


class PolicySet:
    """The rules run before forwarding, in order; the most severe verdict wins (block > clarify > warn > allow)."""

    def __init__(self, rules: Iterable[PolicyRule] = ()) -> None:
        self._rules: dict[str, PolicyRule] = {}
        for rule in rules:
            self.add(rule)

    @property
    def rules(self) -> list[PolicyRule]:
        """The rules, in evaluation order."""
        return list(self._rules.values())

    def add(self, rule: PolicyRule) -> None:
        """Add a rule (``ValueError`` if one with its name exists)."""
        if rule.name in self._rules:
            raise ValueError(f"a policy rule named {rule.name!r} already exists")
        self._rules[rule.name] = rule

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Switch one rule on or off (``KeyError`` if there is none of that name)."""
        if name not in self._rules:
            raise KeyError(f"no policy rule named {name!r}; known: {', '.join(self._rules) or 'none'}")
        self._rules[name].enabled = enabled

    def evaluate(self, request: ToolRequest) -> tuple[PolicyVerdict, list[PolicyVerdict]]:
        """Run the rules that apply; return the verdict (reasons of the worst) and every non-allow one, in order."""
        verdicts: list[PolicyVerdict] = []
        for rule in self._rules.values():
            if not rule.enabled or not rule.applies_to(request.name) or (rule.once_per_call and rule.fired):
                continue
            verdict = rule.check(request)
            if verdict is None or verdict.action == "allow":
                continue
            rule.fired += 1
            verdicts.append(PolicyVerdict(verdict.action, verdict.reason, rule.name))
        if not verdicts:
            return PolicyVerdict("allow"), []
        worst = max(verdicts, key=lambda v: _SEVERITY[v.action])
        reasons = "; ".join(v.reason for v in verdicts if _SEVERITY[v.action] == _SEVERITY[worst.action])
        return PolicyVerdict(worst.action, reasons, worst.rule), verdicts
