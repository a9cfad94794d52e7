"""The model side of a scenario: the scripted model's decisions and what each one does."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from pipecat_harness.sim.strict_model import StrictModel

__all__ = ["TEMPLATE_FILTERS", "TEMPLATE_PATTERN", "DecisionCondition", "ModelAction", "ModelDecision", "ModelScript",
           "ToolCallSpec"]


#: A ``{group}`` or ``{group|filter}`` placeholder in a scripted reply or tool argument.
TEMPLATE_PATTERN = re.compile(r"\{(\w+)(?:\|(\w+))?\}")
#: The filters a placeholder may name (applied by the scripted model).
TEMPLATE_FILTERS = ("identifier", "upper", "lower", "raw")


def _template_strings(value: Any, where: str = "") -> list[tuple[str, str]]:
    """Every string inside ``value`` with where it is (``tool_calls[0].order_id``)."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [item for key, v in value.items() for item in _template_strings(v, f"{where}.{key}".lstrip("."))]
    if isinstance(value, list):
        return [item for i, v in enumerate(value) for item in _template_strings(v, f"{where}[{i}]")]
    return []


class ToolCallSpec(StrictModel):
    """A tool call the scripted model makes.

    Parameters:
        name: The tool (a retail tool or one the scenario declares).
        args: Its arguments; strings may use ``{group}`` or ``{group|filter}`` templates from ``when.user``.
    """

    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class DecisionCondition(StrictModel):
    """When a scripted decision applies. All given fields must hold.

    Parameters:
        start: The context has no user message yet (the bot speaks first).
        user: Regular expression searched in the newest user message; named groups become template variables.
        tool: The newest messages are results of this tool.
        result: Regular expression searched in those tool results (JSON).
        said: Regular expression that must match some assistant message in history.
        not_said: Regular expression that must match no assistant message.
        last_said: Regular expression searched in the newest assistant text message.
        system: Regular expression searched in the system instruction the model received (with what was appended to it).
        note: Regular expression searched in the notes (``developer`` messages) added since the model last spoke.
    """

    start: bool | None = None
    user: str | None = None
    tool: str | None = None
    result: str | None = None
    said: str | None = None
    not_said: str | None = None
    last_said: str | None = None
    system: str | None = None
    note: str | None = None

    @field_validator("user", "result", "said", "not_said", "last_said", "system", "note")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
        return value


def _templates(action: ModelAction | ModelDecision) -> dict[str, Any]:
    return {"say": action.say, "tool_calls": [call.args for call in action.tool_calls]}


def _check_templates(value: Any, groups: set[str]) -> None:
    for where, text in _template_strings(value):
        for match in TEMPLATE_PATTERN.finditer(text):
            name, filter_name = match.group(1), match.group(2)
            if name not in groups:
                known = f"its groups are {', '.join(sorted(groups))}" if groups else "it has no named groups"
                fix = f"add (?P<{name}>...) to when.user or correct the name"
                raise ValueError(f"{where}: template '{{{name}}}' names no group of when.user ({known}); {fix}")
            if filter_name is not None and filter_name not in TEMPLATE_FILTERS:
                filters = ", ".join(TEMPLATE_FILTERS)
                raise ValueError(f"{where}: unknown template filter '{filter_name}'; filters are {filters}")


class ModelAction(StrictModel):
    """Something else the model may do instead of a decision's own action (see ``alternatives``).

    Parameters:
        say: Text to generate.
        tool_calls: Tool calls to make after the text.
        weight: Relative chance of this action when the model samples.
    """

    say: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    weight: float = Field(default=1.0, gt=0, le=1000)

    @model_validator(mode="after")
    def _does_something(self) -> ModelAction:
        if not self.say and not self.tool_calls:
            raise ValueError("an alternative needs 'say' or 'tool_calls'")
        return self


class ModelDecision(StrictModel):
    """What the scripted model does when its condition holds.

    Parameters:
        when: The condition (always true when omitted).
        say: Text to generate (streamed token by token).
        tool_calls: Tool calls to make after the text.
        times: How many times the decision may fire.
        weight: Relative chance of the decision's own action when the model samples.
        alternatives: Other actions the model may take instead: a model that samples (``replay --samples``) picks one by
            weight; without a seed (``simulate``, ``eval``) the decision's own action is taken.
    """

    when: DecisionCondition = Field(default_factory=DecisionCondition)
    say: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    times: int = Field(default=1, ge=1, le=1000)
    weight: float = Field(default=1.0, gt=0, le=1000)
    alternatives: list[ModelAction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _does_something(self) -> ModelDecision:
        if not self.say and not self.tool_calls:
            raise ValueError("a decision needs 'say' or 'tool_calls'")
        groups = set(re.compile(self.when.user).groupindex) if self.when.user else set()
        _check_templates(_templates(self), groups)
        _check_templates({f"alternatives[{i}]": _templates(a) for i, a in enumerate(self.alternatives)}, groups)
        return self

    def actions(self) -> list[ModelAction]:
        """The decision's own action first, then its alternatives."""
        return [ModelAction(say=self.say, tool_calls=self.tool_calls, weight=self.weight), *self.alternatives]


class ModelScript(StrictModel):
    """The scripted model: decisions tried in order on every model call.

    Parameters:
        system: The system prompt, set as the LLM service's system instruction.
        greeting: Shorthand for a first decision ``when: {start: true}``.
        decisions: The decisions, tried in order; the first that applies fires.
        fallback: What the model says when no decision applies.
        summary: What the model answers when Pipecat asks it to summarise the context.
        first_token_secs: Latency from the model call to the first token.
        token_secs: Time between streamed tokens.
    """

    system: str = "You are a helpful customer-service agent for an online retailer."
    greeting: str | None = None
    decisions: list[ModelDecision] = Field(default_factory=list)
    fallback: str = "Sorry, could you say that again?"
    summary: str = "The caller and the agent discussed the caller's account."
    first_token_secs: float = Field(default=0.35, ge=0, le=30)
    token_secs: float = Field(default=0.02, ge=0, le=5)
