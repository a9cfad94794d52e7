"""What the gate returns for one tool call, and what the model is told."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["ALREADY_DONE", "NOT_DONE_STATUSES", "GateResult", "GateStatus", "reports_done"]

ALREADY_DONE = "not executed: this request was already done on this call"


class GateStatus(enum.StrEnum):
    """How a tool call ended at the gate."""

    EXECUTED = "executed"
    """Forwarded and the handler returned without error."""
    NOT_EXECUTED = "not_executed"
    """Not forwarded: a duplicate, an interrupted generation, or a pending clarification."""
    BLOCKED = "blocked"
    """Not forwarded: unknown tool, invalid arguments or a policy said no."""
    FAILED = "failed"
    """The backend definitively said no (an ``{"error": ...}`` result, a refusal): nothing applied, retry allowed."""
    OUTCOME_UNKNOWN = "outcome_unknown"
    """No clear answer came (timeout, exception, lost reply): the write may have happened; no retry until reconciled."""


#: Tool-result statuses meaning the action did not happen in this call (or may not have).
NOT_DONE_STATUSES = frozenset({"not_executed", "blocked", "failed", "outcome_unknown", "error", "held", "unknown"})
NOT_DONE_STATUSES |= {"pending", "awaiting_confirmation", "declined", "expired", "superseded"}


def reports_done(result: Any, error: Any = None) -> bool:
    """Whether a tool result as the model got it says the action was done (no :data:`NOT_DONE_STATUSES`, no error)."""
    if error:
        return False
    if isinstance(result, dict):
        return not (result.get("error") or result.get("status") in NOT_DONE_STATUSES)
    return result is not None


@dataclass(frozen=True)
class GateResult:
    """The outcome of :meth:`ToolGate.call`; ``reason_kind`` is machine-readable (``duplicate``, ``policy``...)."""

    status: GateStatus
    name: str
    result: Any = None
    reason: str = ""
    write: bool = False
    idempotency_key: str | None = None
    warnings: tuple[str, ...] = ()
    reason_kind: str = ""

    @property
    def executed(self) -> bool:
        """Whether the handler ran to completion without error in this call."""
        return self.status == GateStatus.EXECUTED

    def to_tool_result(self) -> Any:
        """Return what the model receives: an executed call's result unchanged, else ``status``, ``reason`` and more."""
        if self.status == GateStatus.EXECUTED:
            return self.result
        body: dict[str, Any] = {"status": self.status.value, "reason": self.reason}
        if self.status == GateStatus.NOT_EXECUTED and self.result is not None:
            body["previous_result"] = self.result
        elif self.status == GateStatus.FAILED:
            body["retry_allowed"] = True
            if self.result is not None:
                body["result"] = self.result
        elif self.status == GateStatus.OUTCOME_UNKNOWN:
            body["instruction"] = "Do not repeat this action. Tell the caller it is being checked."
        return body
