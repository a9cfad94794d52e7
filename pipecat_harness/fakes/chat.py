"""What a model fake received and what it answers, independent of the provider's wire format."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["ChatModel", "ChatReply", "ChatRequest", "ReplyList", "as_chat_model"]


@dataclass
class ChatRequest:
    """A model request as the fake received it.

    Parameters:
        provider: Which fake received it.
        model: The model named in the request.
        messages: The conversation, OpenAI-shaped; tool messages carry the tool ``name``.
        tools: Names of the functions offered.
        raw: The request body exactly as received.
        streaming: Whether a stream is asked for (Pipecat's out-of-band inference, such as summarisation, is not).
        max_tokens: The output token limit the request set, if any.
    """

    provider: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[str] = field(default_factory=list)
    raw: Any = None
    streaming: bool = True
    max_tokens: int | None = None

    @property
    def system(self) -> str:
        """The system instruction (the leading system messages, joined)."""
        leading = itertools.takewhile(lambda m: m.get("role") == "system", self.messages)
        return "\n".join(str(m.get("content") or "") for m in leading)


@dataclass
class ChatReply:
    """What the model answers: streamed text, then tool calls (all in one response, run in parallel).

    Parameters:
        tool_calls: ``{"id", "name", "arguments"}`` dictionaries.
        token_secs: Pause between streamed text pieces.
        sent_text: Text written to the service so far (filled in by the fake).
        completed: Whether the fake wrote the whole reply.
    """

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    token_secs: float = 0.0
    sent_text: str = ""
    completed: bool = False


class ChatModel(Protocol):
    """Decides a :class:`ChatReply` for a :class:`ChatRequest` (may take time: the model's latency)."""

    async def reply(self, request: ChatRequest) -> ChatReply:
        """Answer ``request``."""
        ...


class ReplyList:
    """A :class:`ChatModel` answering with fixed replies (or plain strings) in order, then ``fallback``."""

    def __init__(self, replies: Sequence[ChatReply | str], fallback: str = "Okay.") -> None:
        self._replies = [r if isinstance(r, ChatReply) else ChatReply(text=r) for r in replies]
        self._fallback = fallback
        self.requests: list[ChatRequest] = []

    async def reply(self, request: ChatRequest) -> ChatReply:
        """The next reply."""
        self.requests.append(request)
        return self._replies.pop(0) if self._replies else ChatReply(text=self._fallback)


class _FunctionModel:
    def __init__(self, function: Callable[[ChatRequest], ChatReply | Awaitable[ChatReply]]) -> None:
        self._function = function

    async def reply(self, request: ChatRequest) -> ChatReply:
        result = self._function(request)
        return await result if isinstance(result, Awaitable) else result


def as_chat_model(model: ChatModel | Callable[[ChatRequest], Any] | Sequence[ChatReply | str]) -> ChatModel:
    """Accept a :class:`ChatModel`, a function of the request, or a list of replies."""
    if hasattr(model, "reply"):
        return model  # type: ignore[return-value]
    return _FunctionModel(model) if callable(model) else ReplyList(model)
