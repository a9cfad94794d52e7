"""``ProxyService``: build the prompt from the checklist state and stream the upstream answer.

A failing checklist store never stops the answer; a failing or stalled upstream, or a stream without a finish
reason, ends in a short fallback sentence with a proper finish, logged and recorded, never in silence.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from loguru import logger

from pipecat_harness.checklist.directive import DEFAULT_MARKER, Directive
from pipecat_harness.checklist.driver import ChecklistDriver, DecidedTurn
from pipecat_harness.checklist.prompt import content_text, strip_directive_text, strip_directives, user_turns
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.quiet_window import QuietWindow
from pipecat_harness.proxy.tool_stream import CompletedToolCalls, DroppedCall
from pipecat_harness.proxy.turnstile import Turnstile
from pipecat_harness.proxy.upstream import SystemPrompt, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest
from pipecat_harness.proxy.watchdog import Watchdog
from pipecat_harness.tools.arguments import DEFAULT_MAX_ARGUMENT_BYTES

__all__ = ["PreparedTurn", "ProxyService", "snapshot_stamp"]


# What of a platform's message is conversation; anything else (cache hints, provider options) stays behind.
_CONVERSATION_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})

# Longer conversations are split into turns and cleaned in a worker thread, off the event loop.
_OFF_LOOP_MESSAGES = 200

DEFAULT_FALLBACK = "Sorry, I'm having a little trouble on my end. Could you say that again?"


@dataclass
class _Split:
    turns: list[str]
    conversation: list[dict[str, Any]]
    platform_prompt: list[str]
    removed: int
    ignored: int
    dropped_parts: list[str]


@dataclass
class PreparedTurn:
    """The upstream request for one turn and the directive it carries."""

    request: UpstreamRequest
    directive: Directive | None


def snapshot_stamp(caller_turns: int, now: float | None = None) -> float:
    """The debounce stamp of a transcript snapshot: more caller turns is newer, then the later arrival.

    Snapshots reach the proxy on several channels, not always in order; fewer turns never supersede more.
    """
    return caller_turns * 2.0**32 + (time.time() if now is None else now)


class ProxyService:
    """Prompt building and upstream streaming for the proxy.

    Args:
        upstream: The model to call.
        driver: The checklist driver (``None``: plain pass-through with the base prompt).
        marker: Directive line prefix.
        fallback_text: Said when the upstream fails or times out.
        first_token_timeout_secs: Longest wait for the upstream's first chunk.
        chunk_timeout_secs: Longest wait between later chunks.
        policy: The operator's model, limits, tools and base prompt (the platform only sends the conversation).
        max_tool_argument_bytes: Largest streamed arguments payload per tool call (forwarded whole, on completion).
        quiet: When held state saves may start (default: after 5 ms without a new turn, at most 50 ms).
    """

    def __init__(self, upstream: Upstream, driver: ChecklistDriver | None = None, *, marker: str = DEFAULT_MARKER,
                 fallback_text: str = DEFAULT_FALLBACK, first_token_timeout_secs: float = 8.0,
                 chunk_timeout_secs: float = 5.0, policy: ModelPolicy | None = None,
                 max_tool_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES, quiet: QuietWindow | None = None) -> None:
        self.upstream = upstream
        self.policy = policy or ModelPolicy()
        self.driver = driver
        self.marker = marker
        self.fallback_text = fallback_text
        self.first_token_timeout_secs = first_token_timeout_secs
        self.chunk_timeout_secs = chunk_timeout_secs
        self.max_tool_argument_bytes = max_tool_argument_bytes
        # Per call, the state saves still running behind a directive already given (see directive_for).
        self._pending_saves: dict[str, set[asyncio.Task[Any]]] = {}
        self._quiet = quiet or QuietWindow()
        # Each open quiet window's task and the turns it finishes when the window opens.
        self._held: dict[asyncio.Event, tuple[asyncio.Task[None], list[tuple[str, DecidedTurn]]]] = {}
        # Under a burst, one decision per loop iteration: each model request follows its own decision.
        self._turnstile = Turnstile()

    def _record(self, action: str, evidence: dict[str, Any]) -> None:
        if self.driver is not None:
            self.driver.record(action, evidence)

    async def directive_for(self, call_id: str, turns: Sequence[str], *, issue: bool = True) -> Directive | None:
        """Sync the checklist state with ``turns`` and return the directive (``None`` without a driver).

        The directive is decided in this task; saving the state, passing on the decisions and releasing the lock
        wait for the :class:`QuietWindow` (one task per window), and :meth:`stream` waits for them before its
        last chunk.
        """
        directive, window = await self._decide(call_id, turns, issue)
        if window is not None:
            self._quiet.sent(window)  # no model request of this service waits for it
        return directive

    async def _decide(self, call_id: str, turns: Sequence[str],
                      issue: bool) -> tuple[Directive | None, asyncio.Event | None]:
        """The directive, and the quiet window holding the turn's save (``None``: nothing held)."""
        if self.driver is None:
            return None, None
        await self._turnstile.enter()
        try:
            turn = await self.driver.begin(call_id, turns, stamp=snapshot_stamp(len(turns)), issue=issue)
            directive = turn.directive
            if directive is None:
                directive = await self.driver.current_directive(call_id)
        except Exception as exc:
            # The caller must still get an answer; the model goes without a directive this turn.
            self._driver_error(call_id, exc)
            return None, None
        return directive, self._hold(call_id, turn) if turn.pending else None

    def _hold(self, call_id: str, turn: DecidedTurn) -> asyncio.Event:
        """Leave the turn's save to the task of the quiet window it arrived in (one task per window)."""
        window = self._quiet.hold()
        held = self._held.get(window)
        if held is None:
            turns: list[tuple[str, DecidedTurn]] = []
            held = self._held[window] = (asyncio.create_task(self._finish_window(window, turns)), turns)
        held[1].append((call_id, turn))
        self._pending_saves.setdefault(call_id, set()).add(held[0])
        return window

    async def _finish_window(self, window: asyncio.Event, turns: list[tuple[str, DecidedTurn]]) -> None:
        """Once ``window`` opens, finish the turns held in it, all at once."""
        finishing = asyncio.current_task()
        try:
            await window.wait()
            results = await asyncio.gather(*(turn.finish() for _, turn in turns), return_exceptions=True)
            for (call_id, _), result in zip(turns, results, strict=True):
                if isinstance(result, Exception):
                    # The directive already went out; the turns are analysed again next time.
                    self._driver_error(call_id, result)
        finally:
            self._held.pop(window, None)
            for call_id, _ in turns:
                pending = self._pending_saves.get(call_id)
                if pending is not None:
                    pending.discard(finishing)  # type: ignore[arg-type]
                    if not pending:
                        del self._pending_saves[call_id]

    def _driver_error(self, call_id: str, exc: BaseException) -> None:
        logger.warning(f"checklist state unavailable for call {call_id}: {exc}")
        self._record("driver_error", {"call_id": call_id, "error": f"{type(exc).__name__}: {exc}"})

    async def settled(self, call_id: str) -> None:
        """Wait until the checklist state of the call's turns so far is saved."""
        pending = self._pending_saves.get(call_id)
        if pending:
            self._quiet.release()
            await asyncio.wait(tuple(pending))

    async def observe(self, call_id: str, messages: Sequence[Any]) -> Directive | None:
        """Update the state from a conversation snapshot without issuing a directive (webhook channel)."""
        directive = await self.directive_for(call_id, user_turns(messages), issue=False)
        await self.settled(call_id)  # nothing waits on this channel: answer once the state is stored
        return directive

    def _split(self, messages: Sequence[dict[str, Any]]) -> _Split:
        """Caller turns, conversation and trusted platform prompt text of ``messages``, directives removed."""
        cleaned, removed = strip_directives(messages, self.marker)
        conversation: list[dict[str, Any]] = []
        platform_prompt: list[str] = []
        dropped_parts: list[str] = []
        ignored = 0
        for message in cleaned:
            if message.get("role") in ("system", "developer"):
                if not self.policy.trust_platform_prompt:
                    ignored += 1
                    continue
                text = strip_directive_text(content_text(message.get("content"), "\n"), self.marker).strip()
                if text:
                    platform_prompt.append(text)
            else:
                kept = {k: v for k, v in message.items() if k in _CONVERSATION_KEYS}
                if isinstance(kept.get("content"), list):
                    kept["content"], dropped = self.policy.content(kept["content"])
                    dropped_parts.extend(dropped)
                conversation.append(kept)
        return _Split(user_turns(messages), conversation, platform_prompt, removed, ignored, dropped_parts)

    async def forget(self, call_id: str) -> None:
        """Drop a finished call's checklist state (the platform said the call ended)."""
        if self.driver is not None:
            await self.driver.reset(call_id)
            self._record("forgotten", {"call_id": call_id})

    async def prepare(self, call_id: str, messages: Sequence[dict[str, Any]]) -> PreparedTurn:
        """Build the upstream request for one turn: old directives stripped, model, limits and tools from the policy.

        The stable base block is the operator's and the checklist's base prompt (plus the platform's system text
        when the policy trusts it); the fresh directive is the second block.
        """
        split = (await asyncio.to_thread(self._split, messages) if len(messages) > _OFF_LOOP_MESSAGES
                 else self._split(messages))
        directive, window = await self._decide(call_id, split.turns, True)
        if split.dropped_parts:
            logger.info(f"call {call_id}: content parts not sent upstream: {sorted(set(split.dropped_parts))}")
        if self.driver is not None and self.driver.wants_decisions():
            # Recorded once this task waits, as the state save is: after the model request has gone out.
            loop = asyncio.get_running_loop()
            for action, field_name, value in (("stripped_directives", "messages", split.removed),
                                              ("ignored_platform_prompt", "messages", split.ignored),
                                              ("dropped_content_parts", "types", split.dropped_parts)):
                if value:
                    loop.call_soon(self._record, action, {"call_id": call_id, field_name: value})
        policy = self.policy
        base_parts = [policy.base_prompt] if policy.base_prompt else []
        if self.driver is not None:
            base_parts.append(self.driver.checklist.base_prompt)
        base_parts.extend(text for text in split.platform_prompt if text not in base_parts)
        rendered = directive.render(self.marker) if directive is not None else ""
        request = UpstreamRequest(system=SystemPrompt("\n\n".join(p for p in base_parts if p), rendered),
                                  messages=split.conversation, tools=policy.tool_list(),
                                  tool_choice=policy.tool_choice if policy.tools else None,
                                  max_tokens=policy.max_tokens, model=policy.model, temperature=policy.temperature)
        if window is not None:
            request.sent = functools.cache(functools.partial(self._quiet.sent, window))  # reported once
        return PreparedTurn(request=request, directive=directive)

    async def stream(self, request: UpstreamRequest, *, call_id: str = "") -> AsyncIterator[UpstreamChunk]:
        """Stream the upstream answer; always ends with exactly one chunk carrying a finish reason."""
        iterator = aiter(self.upstream.stream(request))
        first = True
        calls = CompletedToolCalls(max_bytes=self.max_tool_argument_bytes)
        watchdog = Watchdog(self.first_token_timeout_secs)
        try:
            while True:
                try:
                    watchdog.wait(self.first_token_timeout_secs if first else self.chunk_timeout_secs)
                    try:
                        chunk = await anext(iterator)
                        if first:
                            request.sent()  # (if the upstream has not said so already)
                    except StopAsyncIteration:
                        # A cut stream, or a 200 with an empty body: not an answer.
                        raise UpstreamError("the upstream stream ended without a finish reason") from None
                    except asyncio.CancelledError:
                        watchdog.raise_if_expired()
                        raise
                    finally:
                        watchdog.waiting = False
                except (UpstreamError, TimeoutError) as exc:
                    reason = "timeout" if isinstance(exc, TimeoutError) else "error"
                    logger.warning(f"upstream {reason} for call {call_id}: {exc}")
                    self._record("upstream_fallback", {"call_id": call_id, "reason": reason, "error": str(exc)})
                    self._dropped(call_id, calls.abandon())
                    yield UpstreamChunk(text=("" if first else " ") + self.fallback_text)
                    await self.settled(call_id)
                    yield UpstreamChunk(finish_reason="stop")
                    break
                first = False
                for delta in chunk.tool_calls:
                    calls.add(delta)  # released whole on the completed-call event, never as fragments
                if chunk.finish_reason is not None:
                    released, dropped = calls.complete()
                    self._dropped(call_id, dropped)
                    if chunk.text or released:
                        yield UpstreamChunk(text=chunk.text, tool_calls=tuple(released))
                    finish = "stop" if chunk.finish_reason == "tool_calls" and not released else chunk.finish_reason
                    await self.settled(call_id)
                    yield UpstreamChunk(finish_reason=finish)
                    break
                if chunk.text:  # a text chunk without a finish goes on as it came, without its call fragments
                    yield UpstreamChunk(text=chunk.text) if chunk.tool_calls else chunk
        finally:
            request.sent()
            watchdog.cancel()
            closer = getattr(iterator, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:  # the stream is abandoned either way
                    logger.opt(exception=True).debug("upstream stream close failed")

    def _dropped(self, call_id: str, dropped: list[DroppedCall]) -> None:
        for call in dropped:
            logger.warning(f"call {call_id}: tool call {call.name or call.index} not forwarded: {call.reason}")
            self._record("tool_call_dropped", {"call_id": call_id, "tool": call.name, "reason": call.reason})
