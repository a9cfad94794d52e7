"""The record every control keeps: evidence, action, and later the outcome.

A control never acts silently. Each time it holds, merges, releases, rewrites,
forwards, blocks, truncates or retains something it records a
:class:`ControlDecision` in the call's :class:`DecisionLog`. The trace recorder
puts those decisions on the call timeline next to the frames they affected,
and the evaluation counts them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ControlDecision", "DecisionListener", "DecisionLog"]

_ids = itertools.count(1)


@dataclass
class ControlDecision:
    """One decision taken by one control.

    Parameters:
        control: Name of the control (``"identifier_hold"``, ``"tool_gate"``...).
        action: What it did (``"held"``, ``"merged"``, ``"released"``,
            ``"forwarded"``, ``"not_executed"``, ``"blocked"``, ``"truncated"``,
            ``"removed"``, ``"retained"``, ``"rewritten"``, ``"reasked"``...).
        evidence: The state that justified the action (JSON-serialisable).
        call_id: The call the decision belongs to.
        turn_id: The user turn during which it was taken.
        outcome: What followed, filled in later (``None`` until known).
        at: Seconds since the start of the call (loop time).
        decision_id: Unique id within the process.
    """

    control: str
    action: str
    evidence: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    turn_id: int = 0
    outcome: dict[str, Any] | None = None
    at: float = 0.0
    decision_id: int = field(default_factory=lambda: next(_ids))

    def to_dict(self) -> dict[str, Any]:
        """Return the decision as a JSON-serialisable mapping."""
        return {
            "decision_id": self.decision_id,
            "control": self.control,
            "action": self.action,
            "call_id": self.call_id,
            "turn_id": self.turn_id,
            "at": round(self.at, 4),
            "evidence": self.evidence,
            "outcome": self.outcome,
        }


DecisionListener = Callable[[str, ControlDecision], None]
"""Called with ``("decision" | "outcome", decision)`` whenever the log changes."""


class DecisionLog:
    """Per-call log of control decisions with a current turn counter.

    Args:
        call_id: Identifier of the call.
        time_source: Returns the current time in seconds; defaults to the
            running event loop's clock, so decisions line up with frame times
            in real and simulated calls alike.
    """

    def __init__(self, call_id: str, *, time_source: Callable[[], float] | None = None) -> None:
        self.call_id = call_id
        self.turn_id = 0
        self._time_source = time_source
        self._started: float | None = None
        self._decisions: list[ControlDecision] = []
        self._listeners: list[DecisionListener] = []

    @property
    def decisions(self) -> list[ControlDecision]:
        """All decisions recorded so far, oldest first."""
        return list(self._decisions)

    def start(self) -> None:
        """Mark the start of the call; decision times are relative to it."""
        self._started = self._now()

    def next_turn(self) -> int:
        """Advance the user-turn counter and return the new turn id."""
        self.turn_id += 1
        return self.turn_id

    def add_listener(self, listener: DecisionListener) -> None:
        """Subscribe to new decisions and outcome updates."""
        self._listeners.append(listener)

    def record(self, control: str, action: str, evidence: Mapping[str, Any] | None = None) -> ControlDecision:
        """Record a decision and notify listeners.

        Args:
            control: Name of the control taking the decision.
            action: The action taken.
            evidence: The state that justified it.

        Returns:
            The recorded decision, whose outcome can be filled in later with
            :meth:`set_outcome`.
        """
        decision = ControlDecision(
            control=control,
            action=action,
            evidence=dict(evidence or {}),
            call_id=self.call_id,
            turn_id=self.turn_id,
            at=self.elapsed(),
        )
        self._decisions.append(decision)
        self._notify("decision", decision)
        return decision

    def set_outcome(self, decision: ControlDecision, outcome: Mapping[str, Any]) -> None:
        """Attach what followed a decision and notify listeners."""
        decision.outcome = dict(outcome)
        self._notify("outcome", decision)

    def by_control(self, control: str) -> list[ControlDecision]:
        """Return the decisions of one control."""
        return [d for d in self._decisions if d.control == control]

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (or since the first reading)."""
        now = self._now()
        if self._started is None:
            self._started = now
        return now - self._started

    def _now(self) -> float:
        if self._time_source is not None:
            return self._time_source()
        try:
            import asyncio

            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def _notify(self, kind: str, decision: ControlDecision) -> None:
        for listener in self._listeners:
            listener(kind, decision)
