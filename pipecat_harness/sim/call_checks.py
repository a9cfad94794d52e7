"""The expectations of a scenario, checked against the end of its call."""

from __future__ import annotations

import re
from typing import Any

from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.sim.call_result import CheckResult
from pipecat_harness.sim.caller import SimulatedCaller
from pipecat_harness.sim.history_metrics import TurnPlayback
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.sim.scripted_llm import ModelCall

__all__ = ["check_context", "check_history", "check_state"]


async def check_state(scenario: Scenario, db: RetailDatabase, caller: SimulatedCaller,
                      timed_out: bool) -> list[CheckResult]:
    """The business-state checks, whether the caller got through, and whether the call ended in time."""
    checks = []
    for check in scenario.expect.state:
        try:
            value = await db.scalar(check.sql)
        except Exception as exc:  # a broken expectation query is a failed check, not a crash
            checks.append(CheckResult(f"state: {check.sql}", False, f"query failed: {exc}"))
            continue
        detail = f"got {value!r}, expected {check.equals!r}" + (f" ({check.why})" if check.why else "")
        checks.append(CheckResult(f"state: {check.sql}", _equal(value, check.equals), detail))
    if scenario.expect.caller_completed:
        gave_up = f"caller gave up waiting before turn {caller.gave_up_at_turn}"
        detail = ("caller finished the script" if caller.completed
                  else gave_up if caller.gave_up_at_turn is not None else "call did not finish")
        checks.append(CheckResult("caller completed", caller.completed, detail))
    if timed_out:
        checks.append(CheckResult("call ended", False, f"exceeded max_call_secs={scenario.max_call_secs}"))
    return checks


def check_history(scenario: Scenario, playback: list[TurnPlayback], calls: list[ModelCall]) -> list[CheckResult]:
    """The history limits: unplayed words kept, played words removed, replies repeated."""
    spec = scenario.expect.history
    replies = [" ".join(c.text.lower().split()) for c in calls if c.text.strip()]
    unplayed = max((t.unplayed_retained for t in playback), default=0)
    removed = max((t.played_removed for t in playback), default=0)
    repeats = sum(1 for i, r in enumerate(replies) if r in replies[:i])
    limits = [
        ("history: unplayed words retained", spec.max_unplayed_words, unplayed, f"at most {unplayed} per turn"),
        ("history: played words removed", spec.max_removed_words, removed, f"at most {removed} per turn"),
        ("history: repeated replies", spec.max_repeated_replies, repeats, f"{repeats} repeated"),
    ]
    return [CheckResult(name, value <= limit, f"{measured} (limit {limit})")
            for name, limit, value, measured in limits if limit is not None]


def _equal(value: Any, expected: Any) -> bool:
    if isinstance(value, (int, float)) and isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return abs(float(value) - float(expected)) < 1e-6
    return value == expected or str(value) == str(expected)


def check_context(scenario: Scenario, context: Any, llm: Any) -> list[CheckResult]:
    """The final context's expectations: what it holds, its size, whether ``llm`` was asked to summarise it."""
    if (spec := scenario.expect.context) is None:
        return []
    from pipecat_harness.business.context_budget import estimate_tokens

    messages = [m for m in context.get_messages() if isinstance(m, dict)]
    texts = [str(m.get("content", "")) for m in messages]
    checks = []
    for pattern in spec.contains:
        found = any(re.search(pattern, text) for text in texts)
        where = "present in" if found else "missing from"
        checks.append(CheckResult(f"context contains {pattern!r}", found, f"{where} the final context"))
    if spec.max_tokens is not None:
        tokens = estimate_tokens(messages)
        budget = f"{tokens} tokens at the end (budget {spec.max_tokens})"
        checks.append(CheckResult("context budget", tokens <= spec.max_tokens, budget))
    if spec.summarized:
        count = len(getattr(llm, "summary_requests", []))
        checks.append(CheckResult("context summarised", count > 0, f"{count} summaries requested"))
    return checks
