"""OpenAI ``chat.completion.chunk`` Server-Sent Events as Vapi expects them, as bytes ready for the socket.

A completion's chunks share id, timestamp and model, so the frame is rendered once; a text event JSON-encodes
only its text.
"""

from __future__ import annotations

import json
import secrets
import time
from json.encoder import encode_basestring
from typing import Any

from pipecat_harness.proxy.upstream import ToolCallDelta

__all__ = ["DONE_EVENT", "ChunkWriter"]

DONE_EVENT = b"data: [DONE]\n\n"

# What ``json.dumps(text, ensure_ascii=False)`` returns for a string, without the encoder object it builds per call.
_json_string = encode_basestring
_TEXT_TAIL = '},"finish_reason":null}]}\n\n'


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _utf8(text: str) -> bytes:
    # A lone surrogate (a model can emit one) has no UTF-8 form: written as its JSON escape, the event stays valid.
    return text.encode("utf-8", "backslashreplace")


class ChunkWriter:
    """Builds the chunks of one streamed completion (shared id, model and timestamp).

    Args:
        model: Model name echoed in every chunk.
    """

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model or "pipecat-harness-proxy"
        # What _dumps gives for {"id", "object", "created", "model"} without its closing brace (the id is hex).
        head = f'{{"id":"{self.id}","object":"chat.completion.chunk","created":{self.created},"model":'
        self._head = f'data: {head}{_json_string(self.model)},"choices":[{{"index":0,"delta":'
        self._text_head = self._head + '{"content":'

    def _object(self, kind: str, choice: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model, "choices": [choice]}

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """A ``chat.completion.chunk`` object."""
        return self._object("chat.completion.chunk", {"index": 0, "delta": delta, "finish_reason": finish_reason})

    def _event(self, delta: str, finish_reason: str | None = None) -> bytes:
        finish = "null" if finish_reason is None else _dumps(finish_reason)
        return _utf8(f'{self._head}{delta},"finish_reason":{finish}}}]}}\n\n')

    def role(self) -> bytes:
        """The opening event announcing the assistant role."""
        return self._event('{"role":"assistant","content":""}')

    def text(self, text: str) -> bytes:
        """A text delta event."""
        return _utf8(self._text_head + _json_string(text) + _TEXT_TAIL)

    def tool_calls(self, calls: tuple[ToolCallDelta, ...]) -> bytes:
        """A ``delta.tool_calls`` event."""
        return self._event(_dumps({"tool_calls": [call.to_openai() for call in calls]}))

    def finish(self, reason: str) -> bytes:
        """The closing event with the finish reason."""
        return self._event("{}", reason)

    def completion(self, text: str, tool_calls: list[dict[str, Any]], finish_reason: str) -> dict[str, Any]:
        """A non-streamed ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return self._object("chat.completion", {"index": 0, "message": message, "finish_reason": finish_reason})
