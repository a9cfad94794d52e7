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
    """The backend definitively said no (an ``{"error": ...}`` result, a refusal); nothing was applied, a retry is
    allowed."""
    OUTCOME_UNKNOWN = "outcome_unknown"
    """Forwarded and no clear answer came (timeout, exception, lost reply); the write may have happened, so it is not
    retried until reconciled."""


#: Tool-result statuses meaning the action did not happen in this call (or may not have).
NOT_DONE_STATUSES = frozenset({
    "not_executed", "blocked", "failed", "outcome_unknown", "error", "awaiting_confirmation", "held", "unknown",
    "declined", "expired", "superseded", "pending",
})


def reports_done(result: Any, error: Any = None) -> bool:
    """Whether a tool result, as the model received it, says the action was done by this call.

    ``not_executed``, ``blocked``, ``failed`` and ``outcome_unknown`` gate
    results, a proposal ``awaiting_confirmation`` (or ``declined``, ``expired``,
    ``superseded``), a ``held``, ``pending`` or ``unknown`` status, an
    ``{"error": ...}`` result and a raised error (``error``) are all "not
    done" — with or without a ledger behind them.
    """
    if error:
        return False
    if isinstance(result, dict):
        return not (result.get("error") or result.get("status") in NOT_DONE_STATUSES)
    return result is not None


@dataclass(frozen=True)
class GateResult:
    """The outcome of :meth:`ToolGate.call`.

    Parameters:
        status: How the call ended.
        name: Tool name.
        result: The handler's result (for a suppressed duplicate, the earlier call's result).
        reason: Why it was not executed, blocked, failed or is unknown.
        write: Whether the tool changes business state.
        idempotency_key: The ledger key of the operation, for writes.
        warnings: Reasons of ``warn`` policy verdicts.
        reason_kind: Machine-readable reason (``duplicate``, ``malformed_json``,
            ``policy``, ``timeout``, ``interrupted``...).
    """

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
        """Return what the model receives as the tool result.

        An executed call returns the handler's result unchanged, so the model
        sees exactly what it would see without the gate. Everything else is a
        small object whose ``status`` and ``reason`` say what happened and what
        the model should do next.
        """
        if self.status == GateStatus.EXECUTED:
            return self.result
        if self.status == GateStatus.NOT_EXECUTED:
            body: dict[str, Any] = {"status": "not_executed", "reason": self.reason}
            if self.result is not None:
                body["previous_result"] = self.result
            return body
        if self.status == GateStatus.BLOCKED:
            return {"status": "blocked", "reason": self.reason}
        if self.status == GateStatus.FAILED:
            body = {"status": "failed", "reason": self.reason, "retry_allowed": True}
            if self.result is not None:
                body["result"] = self.result
            return body
        return {
            "status": "outcome_unknown",
            "reason": self.reason,
            "instruction": "Do not repeat this action. Tell the caller it is being checked.",
        }
