"""The checks whose feedback a replay returns at the model's tool call, from a gate brought up to the call's state."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pipecat_harness.demo.retail_tools import normalize_order_id
from pipecat_harness.replay.actions import NextAction, ToolCall
from pipecat_harness.replay.decision_point import DecisionPoint, ReplayError
from pipecat_harness.spoken import spoken_to_identifier, written_to_spoken
from pipecat_harness.tools.gate import ToolGate
from pipecat_harness.tools.policy import PolicyRule, PolicySet, PolicyVerdict, ToolRequest
from pipecat_harness.tools.result import reports_done

__all__ = ["CHECKS", "ToolCheck", "inspect_orders_rule", "listed_orders", "load_check"]

RuleFactory = Callable[[DecisionPoint], Iterable[PolicyRule]]

#: Writes that change an existing order (what the order-inspection rule guards).
ORDER_WRITES = frozenset({"cancel_pending_order", "modify_order_address", "return_items", "issue_refund"})

_LET_THROUGH = {"status": "not_run", "reason": "replay: the check let this call through"}
_DIGITS = r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine)"
_SPOKEN_ORDER = re.compile(rf"\bW(?:[\s,.-]+{_DIGITS}){{7}}\b", re.IGNORECASE)


@dataclass(frozen=True)
class ToolCheck:
    """A tool-call check: ``reminder``, its rule in words, and ``rules``, extra policy rules (none: the gate alone)."""

    name: str
    reminder: str
    rules: RuleFactory | None = None

    async def feedback(self, point: DecisionPoint, action: NextAction,
                       write_tools: Iterable[str]) -> list[tuple[ToolCall, Any]] | None:
        """The tool results the check returns for ``action``'s calls, or ``None`` when it refuses none."""
        if not action.tool_calls:
            return None
        schemas = {tool["name"]: tool.get("parameters") or {} for tool in point.tools if tool.get("name")}
        policies = PolicySet(self.rules(point) if self.rules is not None else ())
        gate = ToolGate(write_tools, schemas=schemas or None, policies=policies, timeout_secs=None)
        await _bring_up_to_date(gate, point.messages)
        outcomes = [(call, await gate.call(call.name, call.arguments, _not_run, tool_call_id=call.tool_call_id or None))
                    for call in action.tool_calls]
        if all(outcome.executed for _, outcome in outcomes):
            return None
        return [(call, dict(_LET_THROUGH) if o.executed else o.to_tool_result()) for call, o in outcomes]


async def _not_run(arguments: Mapping[str, Any]) -> Any:
    return {"status": "not_run"}


async def _bring_up_to_date(gate: ToolGate, messages: list[dict[str, Any]]) -> None:
    """Put the context's recorded tool calls through the gate, with their recorded results."""
    results = {str(m.get("tool_call_id", "")): _parsed(m.get("content")) for m in messages if m.get("role") == "tool"}
    for message in messages:
        if message.get("role") == "user":
            gate.new_turn()
        for call in message.get("tool_calls") or []:
            recorded = results.get(str(call.get("id", "")))
            if recorded is None or not reports_done(recorded):
                continue  # it did not happen: the gate must not count it as done
            function = call.get("function") or {}

            async def answer(arguments: Mapping[str, Any], recorded: Any = recorded) -> Any:
                return recorded

            await gate.call(str(function.get("name", "")), function.get("arguments") or "{}", answer)


def _parsed(content: Any) -> Any:
    try:
        return json.loads(content) if isinstance(content, str) else content
    except ValueError:
        return content


def listed_orders(text: str) -> list[str]:
    """Order ids in a caller's words (``W two three ...`` or ``W2378156``), canonical, in order."""
    matches = _SPOKEN_ORDER.finditer(written_to_spoken(text))
    return list(dict.fromkeys(normalize_order_id(spoken_to_identifier(m.group(0))) for m in matches))


def inspect_orders_rule(point: DecisionPoint) -> list[PolicyRule]:
    """Block a change to an order whose details were not retrieved; list the named orders still to retrieve."""
    said = [m["content"] for m in point.messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    listed = list(dict.fromkeys(order for text in said for order in listed_orders(text)))
    inspected = set()
    for function in [c.get("function") or {} for m in point.messages for c in m.get("tool_calls") or []]:
        arguments = _parsed(function.get("arguments") or "{}")
        if function.get("name") == "get_order_details" and isinstance(arguments, dict):
            inspected.add(normalize_order_id(arguments.get("order_id", "")))

    def check(request: ToolRequest) -> PolicyVerdict | None:
        order = normalize_order_id(request.arguments.get("order_id", ""))
        if not order or order in inspected:
            return None
        missing = ", ".join([o for o in listed if o not in inspected] or [order])
        reason = f"not executed: retrieve the details of {missing} with get_order_details before changing an order, "
        return PolicyVerdict("block", reason + "or ask the caller which order they mean and why")

    return [PolicyRule("inspect_orders_first", check, tools=ORDER_WRITES, once_per_call=True)]


#: The checks ``--check`` names.
CHECKS: dict[str, ToolCheck] = {
    "tool_gate": ToolCheck("tool_gate", "Never repeat a write that already succeeded on this call, and never retry one "
                           "whose outcome is unknown; use the earlier result."),
    "inspect_orders": ToolCheck("inspect_orders", "Before changing an order, retrieve the details of every order the "
                                "caller named with get_order_details, or ask the caller which order they mean and why.",
                                inspect_orders_rule),
}


def load_check(spec: str, *, reminder: str | None = None) -> ToolCheck:
    """A check by name, or ``module:function`` returning policy rules for a decision point (else a ``ReplayError``)."""
    if spec in CHECKS:
        check = CHECKS[spec]
    elif ":" in spec:
        module, _, attribute = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise ReplayError(f"--check {spec}: cannot import it ({exc}); give module:function") from exc
        check = ToolCheck(spec, reminder or "", factory)
    else:
        raise ReplayError(f"--check {spec}: unknown check; choose {', '.join(CHECKS)} or give module:function")
    if reminder is not None:
        check = ToolCheck(check.name, reminder, check.rules)
    if not check.reminder:
        raise ReplayError(f"--check {spec}: give --reminder TEXT (the rule in words, for the reminder treatment)")
    return check
