"""A confirmation-bound write the model asked for, and its life: awaiting, confirmed, superseded, declined, expired."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pipecat_harness.tools.canonical import request_hash

__all__ = ["Proposal", "ProposalStatus"]

ProposalStatus = Literal["awaiting_confirmation", "confirmed", "superseded", "declined", "expired"]
_STATUSES = ("awaiting_confirmation", "confirmed", "superseded", "declined", "expired")


@dataclass
class Proposal:
    """A confirmation-bound write the model asked for.

    Parameters:
        proposal_id: Stable id (``proposal-<n>``), the operation id in the call state.
        tool: Tool name.
        arguments: The request's final arguments (as the gate would run them).
        request_hash: Canonical hash of tool and arguments.
        proposed_turn: Caller turn during which the model proposed it.
        status: ``awaiting_confirmation``, ``confirmed`` or ``superseded``.
        confirmed_turn: The caller turn that confirmed it.
        confirmed_text: What the caller said then.
        superseded_by: Id of the proposal that replaced it.
        correction_turn: The caller turn during which it was replaced.
        correction_text: What the caller said then.
        changed_by: Who made the replacing request's new values: ``caller`` (their turn stated
            them) or ``model`` (no caller turn did).
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
    history: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "proposal_id": self.proposal_id, "tool": self.tool, "arguments": dict(self.arguments),
            "status": self.status, "proposed_turn": self.proposed_turn, "confirmed_turn": self.confirmed_turn,
            "confirmed_text": self.confirmed_text, "superseded_by": self.superseded_by,
            "correction_turn": self.correction_turn, "correction_text": self.correction_text,
            "changed_by": self.changed_by, "readback": self.readback, "closed_turn": self.closed_turn,
            "closed_text": self.closed_text,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        """Rebuild a proposal from :meth:`to_dict` (the hash is recomputed from tool and arguments).

        Raises:
            ValueError: A field is missing or has the wrong type.
        """
        try:
            tool, arguments = str(data["tool"]), dict(data["arguments"])
            status = str(data["status"])
            if status not in _STATUSES:
                raise ValueError(f"unknown proposal status {status!r}")
            return cls(
                str(data["proposal_id"]), tool, arguments, request_hash(tool, arguments), int(data["proposed_turn"]),
                status,  # type: ignore[arg-type]
                _optional_int(data.get("confirmed_turn")), str(data.get("confirmed_text") or ""),
                data.get("superseded_by"), _optional_int(data.get("correction_turn")),
                str(data.get("correction_text") or ""), str(data.get("changed_by") or ""),
                str(data.get("readback") or ""), _optional_int(data.get("closed_turn")),
                str(data.get("closed_text") or ""),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a proposal record ({type(exc).__name__}: {exc})") from exc


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
