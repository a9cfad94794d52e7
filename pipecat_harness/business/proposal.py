"""A confirmation-bound write the model asked for, and its life: awaiting, confirmed, superseded, declined, expired."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from pipecat_harness.tools.canonical import request_hash
from pipecat_harness.validation import describe_validation_error

__all__ = ["Proposal", "ProposalStatus"]

ProposalStatus = Literal["awaiting_confirmation", "confirmed", "superseded", "declined", "expired"]


@dataclass
class Proposal:
    """A confirmation-bound write the model asked for.

    Parameters:
        proposal_id: Stable id (``proposal-<n>``), the operation id in the call state.
        tool: Tool name.
        arguments: The request's final arguments (as the gate would run them).
        request_hash: Canonical hash of tool and arguments.
        proposed_turn: Caller turn during which the model proposed it.
        status: Where it stands (:data:`ProposalStatus`).
        confirmed_turn: The caller turn that confirmed it.
        confirmed_text: What the caller said then.
        superseded_by: Id of the proposal that replaced it.
        correction_turn: The caller turn during which it was replaced.
        correction_text: What the caller said then.
        changed_by: Who made the replacing request's new values: ``caller`` (their turn stated them) or ``model``.
        readback: What the caller heard of the read-back they confirmed (or that was re-read).
        closed_turn: The caller turn that declined it, or the turn at which it expired.
        closed_text: What the caller said when declining.
    """

    proposal_id: str
    tool: str
    arguments: dict[str, Any]
    request_hash: str
    proposed_turn: int
    status: ProposalStatus = "awaiting_confirmation"
    confirmed_turn: int | None = None
    confirmed_text: str = ""
    superseded_by: str | None = None
    correction_turn: int | None = None
    correction_text: str = ""
    changed_by: str = ""
    readback: str = ""
    closed_turn: int | None = None
    closed_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (without the hash, which :meth:`from_dict` recomputes)."""
        data = asdict(self)
        del data["request_hash"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        """Rebuild from :meth:`to_dict`, recomputing the hash (``ValueError``: a field is missing or mistyped)."""
        try:
            proposal = _PROPOSAL.validate_python({**data, "request_hash": ""})
        except (ValidationError, TypeError) as exc:
            detail = describe_validation_error(exc) if isinstance(exc, ValidationError) else exc
            raise ValueError(f"not a proposal record: {detail}") from exc
        proposal.request_hash = request_hash(proposal.tool, proposal.arguments)
        return proposal


_PROPOSAL: TypeAdapter[Proposal] = TypeAdapter(Proposal)
