"""``ProxyService``: build the prompt from the checklist state and stream the upstream answer.

Shared by the chat-completions endpoint and the Retell socket. A failing
checklist store never stops the answer (the model gets the base prompt
only), and a failing or stalled upstream ends in a short fallback sentence
with a proper finish, never in silence.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from loguru import logger

from pipecat_harness.checklist.directive import DEFAULT_MARKER, Directive
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.prompt import strip_directive_text, strip_directives, user_turns
from pipecat_harness.proxy.tool_stream import CompletedToolCalls, DroppedCall
from pipecat_harness.proxy.upstream import SystemPrompt, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest
from pipecat_harness.tools.arguments import DEFAULT_MAX_ARGUMENT_BYTES

__all__ = ["PreparedTurn", "ProxyService"]


DEFAULT_FALLBACK = "Sorry, I'm having a little trouble on my end. Could you say that again?"


@dataclass
class PreparedTurn:
    """The upstream request for one turn and the directive it carries."""

    request: UpstreamRequest
    directive: Directive | None


def _system_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class ProxyService:
    """Prompt building and upstream streaming for the proxy.

    Args:
        upstream: The model to call.
        driver: The checklist driver (``None``: plain pass-through with the base prompt).
        marker: Directive line prefix.
        fallback_text: Said when the upstream fails or times out.
        first_token_timeout_secs: Longest wait for the upstream's first chunk.
        chunk_timeout_secs: Longest wait between later chunks.
        max_tool_argument_bytes: Largest streamed arguments payload per tool call; calls are
            forwarded whole, only after the upstream's completed-call event.
    """

    def __init__(
        self,
        upstream: Upstream,
        driver: ChecklistDriver | None = None,
        *,
        marker: str = DEFAULT_MARKER,
        fallback_text: str = DEFAULT_FALLBACK,
        first_token_timeout_secs: float = 8.0,
        chunk_timeout_secs: float = 5.0,
        max_tool_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
    ) -> None:
        self.upstream = upstream
        self.driver = driver
        self.marker = marker
        self.fallback_text = fallback_text
        self.first_token_timeout_secs = first_token_timeout_secs
        self.chunk_timeout_secs = chunk_timeout_secs
        self.max_tool_argument_bytes = max_tool_argument_bytes

    def _record(self, action: str, evidence: dict[str, Any]) -> None:
        if self.driver is not None:
            self.driver.record(action, evidence)

    async def directive_for(self, call_id: str, turns: Sequence[str], *, issue: bool = True) -> Directive | None:
        """Sync the checklist state with ``turns`` and return the directive (``None`` without a driver)."""
        if self.driver is None:
            return None
        try:
            directive = await self.driver.sync(call_id, turns, stamp=time.time(), issue=issue)
            if directive is None:
                directive = await self.driver.current_directive(call_id)
            return directive
        except Exception as exc:
            # The caller must still get an answer; the model goes without a directive this turn.
            logger.warning(f"checklist state unavailable for call {call_id}: {exc}")
            self._record("driver_error", {"call_id": call_id, "error": f"{type(exc).__name__}: {exc}"})
            return None

    async def observe(self, call_id: str, messages: Sequence[Any]) -> Directive | None:
        """Update the state from a conversation snapshot without issuing a directive (webhook channel)."""
        return await self.directive_for(call_id, user_turns(messages), issue=False)

    async def prepare(
        self,
        call_id: str,
        messages: Sequence[dict[str, Any]],
        *,
        model: str = "",
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: Any = None,
        max_tokens: int | None = None,
    ) -> PreparedTurn:
        """Build the upstream request for one turn.

        Old directives are stripped from the incoming messages; the incoming
        system text (and the checklist's base prompt) form the stable base
        block, and the fresh directive forms the second block.
        """
        directive = await self.directive_for(call_id, user_turns(messages))
        cleaned, removed = strip_directives(messages, self.marker)
        if removed:
            self._record("stripped_directives", {"call_id": call_id, "messages": removed})
        base_parts = []
        if self.driver is not None:
            base_parts.append(self.driver.checklist.base_prompt)
        conversation = []
        for message in cleaned:
            if message.get("role") in ("system", "developer"):
                text = strip_directive_text(_system_text(message.get("content")), self.marker).strip()
                if text and text not in base_parts:
                    base_parts.append(text)
            else:
                conversation.append(dict(message))
        system = SystemPrompt(
            base="\n\n".join(base_parts), directive=directive.render(self.marker) if directive is not None else ""
        )
        request = UpstreamRequest(
            system=system,
            messages=conversation,
            tools=list(tools),
            tool_choice=tool_choice,
            max_tokens=max_tokens,
            model=model,
            temperature=0.0,
        )
        return PreparedTurn(request=request, directive=directive)

    async def stream(self, request: UpstreamRequest, *, call_id: str = "") -> AsyncIterator[UpstreamChunk]:
        """Stream the upstream answer; always ends with exactly one chunk carrying a finish reason."""
        iterator = aiter(self.upstream.stream(request))
        first = True
        finished = False
        calls = CompletedToolCalls(max_bytes=self.max_tool_argument_bytes)
        try:
            while True:
                timeout = self.first_token_timeout_secs if first else self.chunk_timeout_secs
                try:
                    async with asyncio.timeout(timeout):
                        chunk = await anext(iterator)
                except StopAsyncIteration:
                    break
                except (UpstreamError, TimeoutError) as exc:
                    reason = "timeout" if isinstance(exc, TimeoutError) else "error"
                    logger.warning(f"upstream {reason} for call {call_id}: {exc}")
                    self._record("upstream_fallback", {"call_id": call_id, "reason": reason, "error": str(exc)})
                    self._dropped(call_id, calls.abandon())
                    prefix = "" if first else " "
                    yield UpstreamChunk(text=prefix + self.fallback_text)
                    yield UpstreamChunk(finish_reason="stop")
                    finished = True
                    break
                first = False
                for delta in chunk.tool_calls:
                    calls.add(delta)  # released whole on the completed-call event, never as fragments
                if chunk.finish_reason is not None:
                    released, dropped = calls.complete()
                    self._dropped(call_id, dropped)
                    if chunk.text or released:
                        yield UpstreamChunk(text=chunk.text, tool_calls=tuple(released))
                    finish = chunk.finish_reason
                    if finish == "tool_calls" and not released:
                        finish = "stop"
                    yield UpstreamChunk(finish_reason=finish)
                    finished = True
                    break
                if chunk.text:
                    yield UpstreamChunk(text=chunk.text)
        finally:
            closer = getattr(iterator, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:  # the stream is abandoned either way
                    logger.opt(exception=True).debug("upstream stream close failed")
        if not finished:
            self._dropped(call_id, calls.abandon())
            yield UpstreamChunk(finish_reason="stop")

    def _dropped(self, call_id: str, dropped: list[DroppedCall]) -> None:
        for call in dropped:
            logger.warning(f"call {call_id}: tool call {call.name or call.index} not forwarded: {call.reason}")
            self._record("tool_call_dropped", {"call_id": call_id, "tool": call.name, "reason": call.reason})
