"""A decision point: one model request of a recorded call, rebuilt from the trace."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.errors import InputError
from pipecat_harness.replay.actions import NextAction, ToolCall, first_words
from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = ["DecisionPoint", "ReplayError", "decision_point", "decision_points"]


class ReplayError(InputError):
    """A replay that cannot run as asked; the message names the option or file and the fix."""


@dataclass(frozen=True)
class DecisionPoint:
    """What the model received at one request, and what it did then.

    Parameters:
        index: The request's number in the call (1 = the first model request).
        t: Seconds into the call.
        messages: The full context the model received (OpenAI-shaped, no system message).
        system: The LLM service's system instruction at that request (``None``: not recorded).
        tools: The function schemas offered (``name``, ``description``, ``parameters``).
        recorded: The action the model took in the recorded call.
    """

    index: int
    t: float
    messages: list[dict[str, Any]]
    system: str | None
    tools: list[dict[str, Any]] = field(default_factory=list)
    recorded: NextAction = field(default_factory=NextAction)

    @property
    def newest_user_text(self) -> str:
        """The newest user message's text (empty when there is none)."""
        content = next((m.get("content") for m in reversed(self.messages) if m.get("role") == "user"), "")
        return content if isinstance(content, str) else json.dumps(content)

    @property
    def after_tool_results(self) -> list[str]:
        """Names of the tools whose results end the context (the request answers them)."""
        calls = [c for m in self.messages for c in m.get("tool_calls") or []]
        names = {str(c.get("id", "")): str(c.get("function", {}).get("name", "")) for c in calls}
        trailing = []
        for message in reversed(self.messages):
            if message.get("role") == "assistant" and message.get("tool_calls") and not message.get("content"):
                continue  # a call of the results that follow
            if message.get("role") != "tool":
                break
            trailing.append(str(message.get("name") or names.get(str(message.get("tool_call_id", "")), "")))
        return trailing[::-1]

    def describe(self) -> str:
        """One line: the request, what it answers, and the recorded action."""
        tools, user = self.after_tool_results, self.newest_user_text
        cause = (f"results of {', '.join(tools)}" if tools else f'user: "{first_words(user, 12)}"' if user
                 else "start of the call")
        return f"#{self.index} t={self.t:.1f}s after {cause} -> {self.recorded.label()}"


def decision_points(timeline: Timeline) -> list[DecisionPoint]:
    """Every model request of a call, in order."""
    points: list[DecisionPoint] = []
    system: str | None = None
    tools: list[dict[str, Any]] = []
    for position, event in enumerate(timeline.events):
        if event.kind != "model_input":
            continue
        system = event.data["system"] if "system" in event.data else system
        tools = list(event.data["tools"] or []) if "tools" in event.data else tools
        messages = [copy.deepcopy(m) for m in timeline.model_context(event) if isinstance(m, dict)]
        recorded = _recorded_action(timeline.events[position + 1 :])
        points.append(DecisionPoint(len(points) + 1, event.t, messages, system, tools, recorded))
    return points


def _recorded_action(after: list[TraceEvent]) -> NextAction:
    text: list[str] = []
    calls: list[ToolCall] = []
    for event in after:
        if event.kind == "model_input":
            break
        data = event.data
        if event.kind == "generated":
            text.append(str(data.get("text", "")))
        elif event.kind == "tool_request":
            arguments, call_id = dict(data.get("arguments") or {}), str(data.get("tool_call_id", ""))
            calls.append(ToolCall(str(data.get("name", "")), arguments, call_id))
    return NextAction(" ".join(text).strip(), tuple(calls))


def decision_point(timeline: Timeline, at: int, *, source: str = "the trace") -> DecisionPoint:
    """The ``at``-th model request of a call (1-based); a ``ReplayError`` when there is none such."""
    points = decision_points(timeline)
    if not points:
        raise ReplayError(f"{source}: no model requests recorded (model_input events); record the call with the "
                          "harness's trace on")
    if not 1 <= at <= len(points):
        raise ReplayError(f"--at {at}: {source} has model requests 1 to {len(points)}; "
                          "'pipecat-harness replay TRACE --list' shows them")
    return points[at - 1]
