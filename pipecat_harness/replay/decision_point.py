"""A decision point: one model request of a recorded call, rebuilt from the trace."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.errors import InputError
from pipecat_harness.replay.actions import NextAction, ToolCall
from pipecat_harness.trace.timeline import Timeline

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
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return ""

    @property
    def after_tool_results(self) -> list[str]:
        """Names of the tools whose results end the context (the request answers them)."""
        names: dict[str, str] = {}
        for message in self.messages:
            for call in message.get("tool_calls") or []:
                names[str(call.get("id", ""))] = str(call.get("function", {}).get("name", ""))
        trailing = []
        for message in reversed(self.messages):
            if message.get("role") == "assistant" and message.get("tool_calls") and not message.get("content"):
                continue  # a call of the results that follow
            if message.get("role") != "tool":
                break
            trailing.append(str(message.get("name") or names.get(str(message.get("tool_call_id", "")), "")))
        return list(reversed(trailing))

    def describe(self) -> str:
        """One line: the request, what it answers, and the recorded action."""
        tools = self.after_tool_results
        cause = f"results of {', '.join(tools)}" if tools else (
            f'user: "{_short(self.newest_user_text)}"' if self.newest_user_text else "start of the call")
        return f"#{self.index} t={self.t:.1f}s after {cause} -> {self.recorded.label()}"


def _short(text: str, words: int = 12) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def decision_points(timeline: Timeline) -> list[DecisionPoint]:
    """Every model request of a call, in order."""
    points: list[DecisionPoint] = []
    system: str | None = None
    tools: list[dict[str, Any]] = []
    events = timeline.events
    for position, event in enumerate(events):
        if event.kind != "model_input":
            continue
        if "system" in event.data:
            system = event.data["system"]
        if "tools" in event.data:
            tools = list(event.data["tools"] or [])
        messages = [copy.deepcopy(m) for m in timeline.model_context(event) if isinstance(m, dict)]
        points.append(DecisionPoint(len(points) + 1, event.t, messages, system, tools,
                                    _recorded_action(events[position + 1:])))
    return points


def _recorded_action(after: list[Any]) -> NextAction:
    text: list[str] = []
    calls: list[ToolCall] = []
    for event in after:
        if event.kind == "model_input":
            break
        if event.kind == "generated":
            text.append(str(event.data.get("text", "")))
        elif event.kind == "tool_request":
            calls.append(ToolCall(str(event.data.get("name", "")), dict(event.data.get("arguments") or {}),
                                  str(event.data.get("tool_call_id", ""))))
    return NextAction(" ".join(text).strip(), tuple(calls))


def decision_point(timeline: Timeline, at: int, *, source: str = "the trace") -> DecisionPoint:
    """The ``at``-th model request of a call (1-based).

    Raises:
        ReplayError: The trace has no model requests, or ``at`` is out of range.
    """
    points = decision_points(timeline)
    if not points:
        raise ReplayError(f"{source}: no model requests recorded (model_input events); record the call with the "
                          "harness's trace on")
    if not 1 <= at <= len(points):
        raise ReplayError(f"--at {at}: {source} has model requests 1 to {len(points)}; "
                          "'pipecat-harness replay TRACE --list' shows them")
    return points[at - 1]
