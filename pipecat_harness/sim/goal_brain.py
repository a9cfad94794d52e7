"""A deterministic caller brain: plays a :class:`CallerGoal` from the conversation alone.

Offline, the LLM caller's requests reach this brain through the loopback OpenAI-compatible fake (bot lines as ``user``
turns, the caller's as ``assistant``). Its policy: open with the reason for the call; give a known fact when asked for
it; repeat its last line when asked to; say it does not know what it does not know; say goodbye and hang up once
``done_when`` matches; otherwise agree.
"""

from __future__ import annotations

import re

from pipecat_harness.fakes.chat import ChatReply, ChatRequest
from pipecat_harness.sim.caller_goal import CallerGoal

__all__ = ["HANG_UP", "GoalBrain"]

#: How a caller line ends the call.
HANG_UP = re.compile(r"\s*\[hang ?up\]\s*", re.IGNORECASE)
_REPEAT = re.compile(r"\b(?:again|repeat|say that)\b", re.IGNORECASE)
_STOPWORDS = frozenset("the a an my your with was were that this what which order from for and paid used".split())


class GoalBrain:
    """A :class:`~pipecat_harness.fakes.ChatModel` answering as the caller of ``goal``."""

    def __init__(self, goal: CallerGoal) -> None:
        self.goal = goal
        asks = [fact.asked_as or r"\s+".join(map(re.escape, fact.what.split())) for fact in goal.knows]
        self._asks = [(fact, re.compile(ask, re.IGNORECASE)) for fact, ask in zip(goal.knows, asks, strict=True)]
        unknown = [re.findall(r"[a-z]+", u.lower()) for u in goal.does_not_know]
        self._unknown = [{w for w in words if len(w) > 2 and w not in _STOPWORDS} for words in unknown]
        self._done = re.compile(goal.done_when, re.IGNORECASE)

    async def reply(self, request: ChatRequest) -> ChatReply:
        """The caller's next line for the conversation in ``request``."""
        return ChatReply(text=self.next_line(request.messages))

    def next_line(self, messages: list[dict[str, object]]) -> str:
        """The next line given the conversation (bot lines as ``user``, the caller's as ``assistant``)."""
        mine = [m for m in messages if m.get("role") == "assistant"]
        last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
        if not mine:
            return self.goal.reason
        if self._done.search(last):
            return "No, that's all, thank you. Goodbye. [hang up]"
        for fact, asks in self._asks:
            if asks.search(last):
                return fact.say
        if _REPEAT.search(last) and len(mine) + 1 < self.goal.max_turns:
            return str(mine[-1].get("content") or "")
        words = set(re.findall(r"[a-z]+", last.lower()))
        if any(unknown & words for unknown in self._unknown):
            return "Sorry, I don't know that."
        if len(mine) + 1 >= self.goal.max_turns:
            return "I have to go now. Goodbye. [hang up]"
        return "Yes, please."
