"""The record every control keeps: evidence, action, and later the outcome.

A control never acts silently: each time it holds, merges, releases, rewrites, blocks or retains something it records
a :class:`ControlDecision` in the call's :class:`DecisionLog`, which the trace puts next to the frames it affected.
"""

from __future__ import annotations

import asyncio
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
        action: What it did (``"held"``, ``"merged"``, ``"released"``, ``"blocked"``, ``"rewritten"``...).
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
        return {"decision_id": self.decision_id, "control": self.control, "action": self.action,
                "call_id": self.call_id, "turn_id": self.turn_id, "at": round(self.at, 4), "evidence": self.evidence,
                "outcome": self.outcome}


DecisionListener = Callable[[str, ControlDecision], None]
"""Called with ``("decision" | "outcome", decision)`` whenever the log changes."""


class DecisionLog:
    """Per-call log of control decisions with a current turn counter.

    Times come from ``time_source`` (seconds), by default the running loop's clock, so decisions line up with frame
    times in real and simulated calls alike.
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
        """Record ``control``'s decision (whose outcome :meth:`set_outcome` fills in later) and notify listeners."""
        decision = ControlDecision(control, action, dict(evidence or {}), self.call_id, self.turn_id, at=self.elapsed())
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
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def _notify(self, kind: str, decision: ControlDecision) -> None:
        for listener in self._listeners:
            listener(kind, decision)
