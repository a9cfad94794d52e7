"""The upstream model interface the proxy calls (OpenAI streaming shape), and the request it sends."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SystemPrompt", "ToolCallDelta", "Upstream", "UpstreamChunk", "UpstreamError", "UpstreamRequest"]


class UpstreamError(RuntimeError):
    """The upstream model failed (connection, HTTP status or malformed stream)."""


@dataclass(frozen=True)
class SystemPrompt:
    """The two-block system prompt: a stable, cacheable base and the per-turn directive.

    Parameters:
        base: Identical on every turn of a call, so providers can cache it.
        directive: This turn's checklist directive (may be empty).
    """

    base: str
    directive: str = ""

    def blocks(self) -> list[str]:
        """The non-empty blocks, base first."""
        return [block for block in (self.base, self.directive) if block]


@dataclass
class UpstreamRequest:
    """One model call made by the proxy, shaped by the operator's :class:`~pipecat_harness.proxy.policy.ModelPolicy`.

    Parameters:
        system: The system prompt.
        messages: Conversation messages in OpenAI chat shape, without system messages.
        tools: OpenAI function tools offered to the model.
        tool_choice: OpenAI ``tool_choice`` passed through.
        max_tokens: Output limit.
        model: Model name from the operator's policy (an upstream's own model setting wins).
        temperature: Sampling temperature from the policy.
        sent: Called by the upstream once the request is out (work that can wait is held until then; without
            the call, the first chunk counts).
    """

    system: SystemPrompt
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    max_tokens: int | None = None
    model: str = ""
    temperature: float = 0.0
    sent: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of one streamed tool call (OpenAI ``delta.tool_calls[i]``); ``arguments`` fragments concatenate."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def to_openai(self) -> dict[str, Any]:
        """The ``delta.tool_calls`` element."""
        function: dict[str, Any] = {"arguments": self.arguments}
        if self.name is not None:
            function["name"] = self.name
        item: dict[str, Any] = {"index": self.index, "function": function}
        if self.id is not None:
            item["id"] = self.id
            item["type"] = "function"
        return item


@dataclass(frozen=True)
class UpstreamChunk:
    """One streamed piece of the model's answer."""

    text: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    finish_reason: str | None = None


class Upstream(abc.ABC):
    """A model the proxy can stream from."""

    name: str = "upstream"

    @abc.abstractmethod
    def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the answer to ``request`` (``UpstreamError`` when the model is unreachable or fails)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""
