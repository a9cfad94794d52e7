"""What the model receives for a gated tool call: a rendering of the operation record.

One of six statuses, read the same way whatever the provider; a write carries its operation id so the model can name
it and the summariser keep it. Only user-safe result fields pass: server context, bookkeeping, ``_``-prefixed fields
and secrets never reach the context. The body is plain JSON, the same in an OpenAI ``tool`` message and a Gemini
``functionResponse``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pipecat_harness.tools.result import ALREADY_DONE, GateResult, GateStatus

__all__ = ["DEFAULT_INTERNAL_FIELDS", "RenderedStatus", "parsed_json", "render_operation_result", "user_safe_fields"]

RenderedStatus = Literal["succeeded", "failed", "outcome_unknown", "blocked", "awaiting_confirmation", "not_executed"]

#: Result fields that are bookkeeping or trusted context, never shown to the model.
DEFAULT_INTERNAL_FIELDS = ("tenant_id", "idempotency_key", "request_hash", "owner", "lease_until", "internal_notes",
                           "internal_id")
# Substrings of field names that mark a secret wherever they appear.
_SECRETS = ("password", "secret", "token", "card_number", "cvv", "ssn", "api_key")
_MAX_ITEMS = 50

_STATUS: dict[GateStatus, RenderedStatus] = {GateStatus.EXECUTED: "succeeded", GateStatus.FAILED: "failed",
                                              GateStatus.OUTCOME_UNKNOWN: "outcome_unknown",
                                              GateStatus.BLOCKED: "blocked", GateStatus.NOT_EXECUTED: "not_executed"}


def user_safe_fields(value: Any, hidden: Iterable[str] = DEFAULT_INTERNAL_FIELDS) -> Any:
    """``value`` without internal or secret fields, at any depth, lists cut to 50 (JSON text is parsed first)."""
    return _safe(parsed_json(value), frozenset(hidden))


def parsed_json(value: Any) -> Any:
    """``value`` parsed when it is JSON text holding an object or a list, else as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _safe(value: Any, hidden: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _safe(v, hidden) for k, v in value.items() if str(k) not in hidden
                and not str(k).startswith("_") and not any(s in str(k).lower() for s in _SECRETS)}
    if isinstance(value, list | tuple):
        return [_safe(v, hidden) for v in list(value)[:_MAX_ITEMS]]
    return value


def render_operation_result(result: GateResult, *, hidden_fields: Iterable[str] = DEFAULT_INTERNAL_FIELDS,
                            proposal_id: str | None = None,
                            operation_id: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The model's view of one gated call: ``{"status", "tool", "operation_id"?, "result"?, "reason"?, ...}``.

    Args:
        result: What the gate decided; for a write it mirrors the ledger record (status, key, stored result).
        hidden_fields: Result fields never shown.
        proposal_id: The pending proposal the gate held this call as for the caller's confirmation, if any.
        operation_id: Maps a ledger key to the id the call's state shows for it (default: the key itself).
    """
    status: RenderedStatus = _STATUS[result.status]
    if proposal_id is not None and result.status == GateStatus.NOT_EXECUTED and result.reason_kind == "clarify":
        status = "awaiting_confirmation"
    body: dict[str, Any] = {"status": status, "tool": result.name}
    if proposal_id is not None and status == "awaiting_confirmation":
        body["operation_id"] = proposal_id
    elif result.write and result.idempotency_key:
        body["operation_id"] = operation_id(result.idempotency_key) if operation_id else result.idempotency_key
    if result.result is not None:
        safe = user_safe_fields(result.result, hidden_fields)
        body["result" if status in ("succeeded", "failed") else "previous_result"] = safe
    if result.reason:
        body["reason"] = result.reason
    if status == "not_executed" and result.reason == ALREADY_DONE:
        body["already_done"] = True
    if status == "failed":
        body["retry_allowed"] = True
    elif status == "outcome_unknown":
        body["instruction"] = "Do not repeat this action. Tell the caller it is being checked."
    elif status == "awaiting_confirmation":
        body["instruction"] = "Read the request back and ask the caller to confirm; it has not been done."
    if result.warnings:
        body["warnings"] = list(result.warnings)
    return body
