"""OpenAI ``chat.completion.chunk`` Server-Sent Events, as Vapi expects them."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pipecat_harness.proxy.upstream import ToolCallDelta

__all__ = ["DONE_EVENT", "ChunkWriter", "sse_event"]

DONE_EVENT = "data: [DONE]\n\n"


def sse_event(payload: dict[str, Any]) -> str:
    """One ``data:`` event (always encodable as UTF-8, even when a model emitted a lone surrogate)."""
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    if not data.isascii():
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate cannot be sent as UTF-8; as a JSON escape it can, and the stream goes on.
            data = json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


class ChunkWriter:
    """Builds the chunks of one streamed completion (shared id, model and timestamp).

    Args:
        model: Model name echoed in every chunk.
    """

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.model = model or "pipecat-harness-proxy"

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """A ``chat.completion.chunk`` object."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def role(self) -> str:
        """The opening event announcing the assistant role."""
        return sse_event(self.chunk({"role": "assistant", "content": ""}))

    def text(self, text: str) -> str:
        """A text delta event."""
        return sse_event(self.chunk({"content": text}))

    def tool_calls(self, calls: tuple[ToolCallDelta, ...]) -> str:
        """A ``delta.tool_calls`` event."""
        return sse_event(self.chunk({"tool_calls": [call.to_openai() for call in calls]}))

    def finish(self, reason: str) -> str:
        """The closing event with the finish reason."""
        return sse_event(self.chunk({}, finish_reason=reason))

    def completion(self, text: str, tool_calls: list[dict[str, Any]], finish_reason: str) -> dict[str, Any]:
        """A non-streamed ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        }
