"""The model's next action at a decision point, and the reference action a scorer compares it with.

A reference is ``tool:NAME`` (calls that tool), ``say:REGEX`` (its text matches, case-insensitive) or ``no_tool:NAME``
(does not call it), alternatives joined with ``|``; the scorer reads it, the model never sees it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.errors import InputError

__all__ = ["NextAction", "ReferenceAction", "ToolCall", "first_words"]


def first_words(text: str, words: int) -> str:
    """The first ``words`` words of ``text``, with `` ...`` when there were more."""
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model made (``tool_call_id``: the model's id of the call)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str = ""

    def label(self) -> str:
        """``name(value, ...)`` with the argument values, for tables."""
        return f"{self.name}({', '.join(str(v) for v in self.arguments.values())})"

    def to_message(self) -> dict[str, Any]:
        """As an OpenAI-shaped ``tool_calls`` entry of an assistant message."""
        function = {"name": self.name, "arguments": json.dumps(self.arguments)}
        return {"id": self.tool_call_id, "type": "function", "function": function}


@dataclass(frozen=True)
class NextAction:
    """What the model did in one response: its text, then its tool calls (in order)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    def label(self) -> str:
        """A short description: the tool calls, or what it said."""
        if self.tool_calls:
            return " + ".join(call.label() for call in self.tool_calls)
        said = first_words(self.text, 8)
        return f'says "{said}"' if said else "(nothing)"

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {"text": self.text, "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls]}


@dataclass(frozen=True)
class ReferenceAction:
    """The expected next action: ``(kind, value)`` alternatives, any one of which matches, parsed from ``source``."""

    alternatives: tuple[tuple[str, str], ...]
    source: str = ""

    @classmethod
    def parse(cls, text: str, *, option: str = "--expect") -> ReferenceAction:
        """Read ``tool:NAME|say:REGEX|no_tool:NAME``; an ``InputError`` names a part of no known kind or a bad regex."""
        parts = []
        for raw in text.split("|"):
            kind, sep, value = raw.strip().partition(":")
            if not sep or kind not in ("tool", "say", "no_tool") or not value.strip():
                raise InputError(f"{option} {text!r}: write each part as tool:NAME, say:REGEX or no_tool:NAME "
                                 f"(joined with |), not {raw.strip()!r}")
            if kind == "say":
                try:
                    re.compile(value)
                except re.error as exc:
                    raise InputError(f"{option} {text!r}: invalid regular expression {value!r}: {exc}") from exc
            parts.append((kind, value.strip()))
        return cls(tuple(parts), text)

    def matches(self, action: NextAction) -> bool:
        """Whether ``action`` is the expected one."""
        names = {call.name for call in action.tool_calls}
        for kind, value in self.alternatives:
            if kind == "say" and re.search(value, action.text, re.IGNORECASE):
                return True
            if kind != "say" and (value in names) == (kind == "tool"):  # tool: called; no_tool: not called
                return True
        return False
