"""Everything the evaluation measures about one call, from its ``CallResult`` and its trace."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import TypeAdapter

from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS
from pipecat_harness.eval.identifier_splits import InputWaiting, measure_input_waiting
from pipecat_harness.eval.interaction import InteractionCosts, measure_interaction
from pipecat_harness.eval.tool_checks import ToolChecks, measure_tool_checks
from pipecat_harness.sim.runner import CallResult
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.trace.timeline import Timeline

__all__ = ["CallMetrics", "HistoryFidelity", "measure_call", "measure_history"]


@dataclass
class HistoryFidelity:
    """History figures of one call (``call_ended_turns``: still playing at the call's limit, so not scored)."""

    assistant_turns: int = 0
    interrupted_turns: int = 0
    unplayed_retained_turns: int = 0
    unplayed_retained_words: int = 0
    played_removed_turns: int = 0
    played_removed_words: int = 0
    repeated_replies: int = 0
    call_ended_turns: int = 0


def measure_history(result: CallResult) -> HistoryFidelity:
    """Measure history fidelity for one call from its playback ground truth and model replies."""
    played, replies = result.playback, [" ".join(reply.lower().split()) for reply in result.model_replies]
    return HistoryFidelity(
        assistant_turns=len(played), interrupted_turns=sum(t.interrupted for t in played),
        unplayed_retained_turns=sum(t.unplayed_retained > 0 for t in played),
        unplayed_retained_words=sum(t.unplayed_retained for t in played),
        played_removed_turns=sum(t.played_removed > 0 for t in played),
        played_removed_words=sum(t.played_removed for t in played), repeated_replies=len(replies) - len(set(replies)),
        call_ended_turns=sum(t.call_ended for t in played))


@dataclass
class CallMetrics:
    """The measured figures of one simulated call (``arm``: ``on`` or ``off``; ``run`` 0: the scenario as written).

    Parameters:
        decisions: Decision counts by ``control/action``.
        usage_reported: Model requests whose usage the provider reported (the token counts are those reports, summed).
        caller_requests: Requests to the goal caller's model (cached lines excluded).
        error: Why the simulation itself failed (empty when it ran); such a call counts as failed.
    """

    scenario: str
    domain: str
    arm: str
    run: int
    controls: list[str]
    passed: bool
    expected: str
    stay_out_of_the_way: bool
    input: InputWaiting = field(default_factory=InputWaiting)
    tools: ToolChecks = field(default_factory=ToolChecks)
    history: HistoryFidelity = field(default_factory=HistoryFidelity)
    interaction: InteractionCosts = field(default_factory=InteractionCosts)
    decisions: dict[str, int] = field(default_factory=dict)
    virtual_secs: float = 0.0
    wall_secs: float = 0.0
    trace: str = ""
    model_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    usage_reported: int = 0
    streamed_chars: int = 0
    caller_requests: int = 0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> CallMetrics:
        """Rebuild from :meth:`to_dict` output (e.g. a results file)."""
        return TypeAdapter(cls).validate_python(raw)


def measure_call(scenario: Scenario, result: CallResult, timeline: Timeline, *, arm: str, run: int) -> CallMetrics:
    """Measure one call of ``scenario``, the variant that was run (its script is the ground truth of what was said)."""
    usage = result.model_usage
    return CallMetrics(
        scenario=scenario.name, domain=scenario.domain, arm=arm, run=run, controls=sorted(result.active_controls),
        passed=result.passed, expected=result.expected, stay_out_of_the_way="stay_out_of_the_way" in scenario.tags,
        input=measure_input_waiting(scenario, timeline, result.decisions),
        tools=measure_tool_checks(timeline, result.decisions, write_tools=result.write_tools or RETAIL_WRITE_TOOLS),
        history=measure_history(result), interaction=measure_interaction(timeline),
        decisions=dict(Counter(f"{d.control}/{d.action}" for d in result.decisions)),
        virtual_secs=round(result.virtual_secs, 3), wall_secs=round(result.wall_secs, 3),
        trace=str(result.trace_path or ""), model_requests=usage.requests, prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens, total_tokens=usage.total_tokens, usage_reported=usage.reported,
        streamed_chars=usage.streamed_chars, caller_requests=result.caller_requests)
