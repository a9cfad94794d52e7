"""Request shapes on which OpenAI-compatible servers differ, and what each named server answers.

Shared by the fake's own tests and the contract tests against a real server
(``tests/realmodel``), so a difference between the fake and the server it
stands for fails one of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import aiohttp

__all__ = ["SHAPES", "Answer", "Shape", "post_shape"]

_CALL = [{"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order_id": "1"}'}}]
_USER = {"role": "user", "content": "Where is my order?"}
_TOOL = {"role": "tool", "tool_call_id": "c1", "content": "shipped"}


@dataclass(frozen=True)
class Answer:
    """HTTP status, and for a 200 whether any event came back (``False``: an empty body)."""

    status: int
    answered: bool = True


OK = Answer(200)
EMPTY = Answer(200, answered=False)


@dataclass(frozen=True)
class Shape:
    """One request body and the answer of each named server."""

    name: str
    messages: tuple[dict, ...]
    expected: dict[str, Answer]
    extra: tuple[tuple[str, object], ...] = ()

    @property
    def body(self) -> dict:
        """The streamed chat-completions body (a small output limit: a real model answers quickly)."""
        return {"model": "m", "stream": True, "max_tokens": 4, "temperature": 0, "messages": list(self.messages),
                **dict(self.extra)}


def _refused(strict: int = 400) -> dict[str, Answer]:
    return {"strict": Answer(strict), "openai": OK, "llama-cpp-python": Answer(500)}


SHAPES = [
    Shape("plain strings", ({"role": "system", "content": "Be brief."}, _USER),
          {"strict": OK, "openai": OK, "llama-cpp-python": OK}),
    Shape("user text parts", ({"role": "user", "content": [{"type": "text", "text": "Where is my order?"}]},),
          {"strict": OK, "openai": OK, "llama-cpp-python": OK}),
    Shape("system text parts", ({"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, _USER),
          _refused()),
    Shape("assistant text parts", (_USER, {"role": "assistant", "content": [{"type": "text", "text": "One moment."}]},
                                   _USER), _refused()),
    Shape("developer role", ({"role": "developer", "content": "Be brief."}, _USER), _refused()),
    Shape("unknown role", ({"role": "critic", "content": "Be brief."}, _USER),
          {"strict": Answer(400), "openai": Answer(400), "llama-cpp-python": Answer(500)}),
    Shape("assistant tool call with null content", (_USER, {"role": "assistant", "content": None, "tool_calls": _CALL},
                                                    _TOOL), _refused()),
    Shape("assistant tool call without content", (_USER, {"role": "assistant", "tool_calls": _CALL}, _TOOL),
          {"strict": Answer(400), "openai": OK, "llama-cpp-python": EMPTY}),
    Shape("assistant tool call with empty content", (_USER, {"role": "assistant", "content": "", "tool_calls": _CALL},
                                                     _TOOL), {"strict": OK, "openai": OK, "llama-cpp-python": OK}),
    Shape("json schema response format", (_USER,),
          _refused(), extra=(("response_format", {"type": "json_schema",
                                                  "json_schema": {"name": "x", "schema": {"type": "object"}}}),)),
]


async def post_shape(base_url: str, body: dict) -> tuple[int, list[dict]]:
    """POST ``body`` to ``base_url``'s chat completions: the status and the stream's JSON events."""
    async with aiohttp.ClientSession() as session, session.post(f"{base_url}/chat/completions", json=body) as reply:
        text = await reply.text()
    events = [json.loads(line[6:]) for line in text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    return reply.status, events
