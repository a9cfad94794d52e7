"""Streamed tool-call arguments held until the upstream's completed-call event.

A client acting on the first fragment that happens to parse acts on half a request, so each call is buffered
in a bounded :class:`~pipecat_harness.tools.arguments.ArgumentAccumulator` and released once, whole, when the
response finishes. A call too large or malformed, or of a stream that broke off, is never sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pipecat_harness.proxy.upstream import ToolCallDelta
from pipecat_harness.tools.arguments import DEFAULT_MAX_ARGUMENT_BYTES, ArgumentAccumulator, ArgumentError

__all__ = ["CompletedToolCalls", "DroppedCall"]


@dataclass(frozen=True)
class DroppedCall:
    """A streamed call that was not released, and why."""

    index: int
    name: str
    reason: str


@dataclass
class _Call:
    index: int
    id: str | None = None
    name: str | None = None


@dataclass
class CompletedToolCalls:
    """Collects one response's tool-call fragments and releases whole calls on completion.

    Args:
        max_bytes: Largest arguments payload per call.
        max_calls: Most calls in one response.
    """

    max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    max_calls: int = 16
    _calls: dict[int, _Call] = field(default_factory=dict)
    _accumulator: ArgumentAccumulator = field(init=False, repr=False)
    _refused: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._accumulator = ArgumentAccumulator(max_bytes=self.max_bytes, max_calls=self.max_calls)

    @property
    def pending(self) -> bool:
        """Whether fragments are buffered."""
        return bool(self._calls)

    def add(self, delta: ToolCallDelta) -> None:
        """Buffer one fragment (never raises: a refused call is reported at completion)."""
        call = self._calls.setdefault(delta.index, _Call(delta.index))
        call.id = delta.id or call.id
        call.name = delta.name or call.name
        if delta.index in self._refused:
            return
        try:
            self._accumulator.add(str(delta.index), delta.arguments, name=delta.name)
        except ArgumentError as exc:
            self._refused[delta.index] = str(exc)

    def complete(self) -> tuple[list[ToolCallDelta], list[DroppedCall]]:
        """The upstream finished: whole calls to send, and the calls dropped with their reasons."""
        released: list[ToolCallDelta] = []
        dropped: list[DroppedCall] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            name = call.name or ""
            if index in self._refused:
                dropped.append(DroppedCall(index, name, self._refused[index]))
                continue
            try:
                arguments = self._accumulator.finish(str(index))
            except ArgumentError as exc:
                dropped.append(DroppedCall(index, name, str(exc)))
                continue
            if not name:
                dropped.append(DroppedCall(index, name, "the call has no tool name"))
                continue
            rendered = json.dumps(arguments, ensure_ascii=False)
            released.append(ToolCallDelta(len(released), call.id or f"call_{index}", name, rendered))
        self._calls.clear()
        return released, dropped

    def abandon(self) -> list[DroppedCall]:
        """The stream broke off before its completion event: every buffered call is dropped."""
        reason = "the stream ended before the call was complete"
        dropped = [DroppedCall(i, c.name or "", reason) for i, c in sorted(self._calls.items())]
        for index in self._calls:
            self._accumulator.discard(str(index))
        self._calls.clear()
        return dropped
