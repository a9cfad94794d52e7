"""An offline upstream for tests, the demo and benchmarks.

Each model call takes the next scripted reply; with none left it speaks the directive's suggested wording.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest

__all__ = ["ScriptedReply", "ScriptedUpstream"]

_WORDING = re.compile(r'Suggested wording: "(.*)"\s*$', re.MULTILINE)


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted model answer.

    Parameters:
        text: What the model says (streamed word by word).
        tool_calls: ``{"name": ..., "arguments": {...}}`` calls, streamed after the text.
        fail_after_chunks: Raise :class:`UpstreamError` after this many chunks.
        stall_secs: Sleep this long after ``fail_after_chunks`` chunks instead of failing (to exercise timeouts).
    """

    text: str = ""
    tool_calls: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    fail_after_chunks: int | None = None
    stall_secs: float = 0.0


class ScriptedUpstream(Upstream):
    """Deterministic upstream.

    Args:
        replies: Scripted replies, used in order (strings are plain text replies).
        token_delay_secs: Pause between streamed chunks.
        first_token_delay_secs: Pause before the first chunk.
        fallback_text: Said when no script is left and there is no directive wording.
        keep_requests: How many of the latest requests :attr:`requests` keeps (older ones are dropped).
    """

    name = "scripted"

    def __init__(self, replies: Sequence[ScriptedReply | str] = (), *, token_delay_secs: float = 0.0,
                 first_token_delay_secs: float = 0.0, fallback_text: str = "Okay.", keep_requests: int = 1_000) -> None:
        self._replies = [ScriptedReply(text=r) if isinstance(r, str) else r for r in replies]
        self.token_delay_secs = token_delay_secs
        self.first_token_delay_secs = first_token_delay_secs
        self.fallback_text = fallback_text
        self.keep_requests = keep_requests
        self.requests: list[UpstreamRequest] = []
        self._served = 0

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the next reply."""
        self.requests.append(request)
        self._served += 1
        if len(self.requests) > self.keep_requests:
            del self.requests[0]
        if self._replies:
            reply = self._replies.pop(0)
        else:
            match = _WORDING.search(request.system.directive)
            reply = ScriptedReply(text=match.group(1) if match else self.fallback_text)
        words = reply.text.split(" ") if reply.text else []
        chunks = [UpstreamChunk(text=word if index == 0 else f" {word}") for index, word in enumerate(words)]
        for index, call in enumerate(reply.tool_calls):
            arguments = json.dumps(call.get("arguments", {}))
            half = len(arguments) // 2
            call_id = str(call.get("id") or f"call_{index}_{self._served}")
            opening = ToolCallDelta(index, call_id, str(call["name"]), arguments[:half])
            chunks.append(UpstreamChunk(tool_calls=(opening,)))
            chunks.append(UpstreamChunk(tool_calls=(ToolCallDelta(index, arguments=arguments[half:]),)))
        chunks.append(UpstreamChunk(finish_reason="tool_calls" if reply.tool_calls else "stop"))
        if self.first_token_delay_secs:
            await asyncio.sleep(self.first_token_delay_secs)
        for sent, chunk in enumerate(chunks):
            if reply.fail_after_chunks is not None and sent == reply.fail_after_chunks:
                if reply.stall_secs:
                    await asyncio.sleep(reply.stall_secs)
                else:
                    raise UpstreamError("scripted upstream failure")
            if sent and self.token_delay_secs:
                await asyncio.sleep(self.token_delay_secs)
            yield chunk
