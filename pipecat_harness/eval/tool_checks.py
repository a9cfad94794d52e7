"""Ground truth for tool checks, per call from the trace's tool lane and the gate's decisions (by ``tool_call_id``).

A write request **executed** unless the gate refused it (a write that timed out under the gate was forwarded). It
**succeeded** unless its result is an error; one of unknown outcome takes the status the gate later ``reconciled`` it
at, so one settled as not applied neither executed nor makes its retry a duplicate. It is a **duplicate** when an
earlier request of the same tool and arguments executed and succeeded (a retry after a failure is not).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pipecat_harness.decisions import ControlDecision
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS
from pipecat_harness.trace.timeline import Timeline

__all__ = ["ToolChecks", "canonical_request", "measure_tool_checks"]

_REFUSALS = {"not_executed", "blocked"}
_DISALLOWED_KINDS = {"unknown_tool", "invalid", "too_large", "policy", "reserved", "schema", "clarify"}


@dataclass
class ToolChecks:
    """Tool-check figures of one call.

    A duplicate that executed is the target error; a refused one is prevented. Other refusals are disallowed (schema,
    policy or unknown-tool reasons), held until settled (``conflict``: an earlier write on the resource unsettled) or
    false blocks. ``lookups`` are read-tool requests, ``follow_up_questions`` replies that ask the caller something.
    """

    write_requests: int = 0
    duplicate_writes_executed: int = 0
    duplicates_prevented: int = 0
    disallowed_prevented: int = 0
    held_until_settled: int = 0
    false_blocks: int = 0
    lookups: int = 0
    follow_up_questions: int = 0


def _normalise(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and key == "order_id":
        text = value.strip().upper().replace(" ", "")
        return text if text.startswith("#") else "#" + text
    return value


def canonical_request(name: str, arguments: Any) -> str:
    """A key equal for two requests of the same tool with the same arguments (order ids normalised)."""
    return name + ":" + json.dumps(_normalise(arguments or {}), sort_keys=True, default=str)


def _failed(result_event: dict[str, Any] | None) -> bool:
    if result_event is None or result_event.get("error"):
        return True  # never answered: it cannot count as a success an identical request would repeat
    result = result_event.get("result")
    return isinstance(result, dict) and ("error" in result or result.get("status") in {"failed", "error"})


def _refusal(decision: ControlDecision) -> bool:
    unknown = decision.action == "outcome_unknown" and decision.evidence.get("reason_kind") == "outcome_unknown"
    return decision.control == "tool_gate" and (decision.action in _REFUSALS or unknown)


def _settled_statuses(decisions: list[ControlDecision]) -> dict[str, str]:
    """The status each forwarded write was settled at, by ``tool_call_id`` (only writes the gate settled later)."""
    keys: dict[str, str] = {}
    settled: dict[str, str] = {}
    for decision in decisions:
        key, call_id = decision.evidence.get("idempotency_key"), decision.evidence.get("tool_call_id")
        if decision.control != "tool_gate" or not key:
            continue
        if decision.action == "reconciled":
            settled[str(key)] = str(decision.evidence.get("status"))
        elif call_id and decision.action in ("forwarded", "outcome_unknown"):
            keys[str(call_id)] = str(key)
    return {call_id: settled[key] for call_id, key in keys.items() if key in settled}


def measure_tool_checks(timeline: Timeline, decisions: Iterable[ControlDecision],
                        write_tools: frozenset[str] = RETAIL_WRITE_TOOLS) -> ToolChecks:
    """Measure tool checks for one call from its trace and its decisions."""
    decisions = list(decisions)
    refused = {str(d.evidence.get("tool_call_id")): d for d in decisions if _refusal(d)}
    settled = _settled_statuses(decisions)
    results = {str(e.data.get("tool_call_id")): e.data for e in timeline.of("tool_result", lane="tool")}
    figures = ToolChecks()
    succeeded: set[str] = set()
    for request in timeline.of("tool_request", lane="tool"):
        name, call_id = str(request.data.get("name")), str(request.data.get("tool_call_id"))
        if name not in write_tools:
            figures.lookups += 1
            continue
        figures.write_requests += 1
        key = canonical_request(name, request.data.get("arguments"))
        refusal = refused.get(call_id)
        if refusal is None:
            status = settled.get(call_id)
            if status == "failed":  # the ledger settled it as not applied: it did not execute
                continue
            if key in succeeded:
                figures.duplicate_writes_executed += 1
            elif status == "succeeded" or not _failed(results.get(call_id)):
                succeeded.add(key)
        elif key in succeeded:
            figures.duplicates_prevented += 1
        elif (reason := refusal.evidence.get("reason_kind")) in _DISALLOWED_KINDS:
            figures.disallowed_prevented += 1
        elif reason == "conflict":
            figures.held_until_settled += 1
        else:
            figures.false_blocks += 1
    replies = timeline.of("generated", lane="model")
    figures.follow_up_questions = sum("?" in str(e.data.get("text", "")) for e in replies)
    return figures
