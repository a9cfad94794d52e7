"""Typed events one control publishes for another within a call (the decision log is for the trace, not for this)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pipecat_harness.decisions import ControlDecision

__all__ = ["CallEvents", "GateDecided", "ReplyDelivered"]

_E = TypeVar("_E")


@dataclass(frozen=True)
class ReplyDelivered:
    """The history control's account of one committed assistant reply: generated, heard, kept, and whether in full."""

    turn_id: int
    generated: str
    heard: str
    retained: str
    full: bool


@dataclass(frozen=True)
class GateDecided:
    """A tool-gate decision (``outcome`` false) or the outcome that then followed it (``outcome`` true)."""

    decision: ControlDecision
    outcome: bool = False


class CallEvents:
    """Subscriptions by event type, and synchronous delivery in subscription order."""

    def __init__(self) -> None:
        self._handlers: dict[type, list[Callable[[Any], None]]] = {}

    def subscribe(self, kind: type[_E], handler: Callable[[_E], None]) -> None:
        """Call ``handler`` with every event of type ``kind`` published from now on."""
        self._handlers.setdefault(kind, []).append(handler)

    def publish(self, event: object) -> None:
        """Deliver ``event`` to the handlers of its type."""
        for handler in self._handlers.get(type(event), ()):
            handler(event)
