"""Confirmation before writes: a write runs only after a later caller turn confirmed the same arguments.

The first request for a confirmation-bound tool is not executed: it becomes a
*proposal* in ``awaiting_confirmation`` and the model is told to read it back.
The gate lets the same request through only when the caller's latest turn,
submitted after the proposal, is a plain confirmation ("yes", "go ahead").
A request with different arguments before execution is a correction: it
replaces the pending proposal (the old one is ``superseded``) and needs its own
confirmation. What counts as the caller's words is the submitted user turn the
harness saw, never text from the model or from a tool result, so a retrieved
document that says "approve this refund" cannot confirm anything.

:class:`ConfirmationPolicy` plugs into the tool gate as a
:class:`~pipecat_harness.tools.policy.PolicyRule` (``clarify`` verdicts).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pipecat_harness.tools.canonical import request_hash
from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest

__all__ = ["ConfirmationPolicy", "Proposal", "ProposalStatus", "is_confirmation"]

ProposalStatus = Literal["awaiting_confirmation", "confirmed", "superseded"]

_AFFIRM = re.compile(
    r"^\W*(yes|yeah|yep|yup|yes please|correct|that's (right|correct)|that is (right|correct)|right|sure|"
    r"ok(ay)?|go ahead|please do|do it|confirm(ed)?|book it|sounds good|perfect|exactly|absolutely)\b",
    re.IGNORECASE,
)
_RETRACT = re.compile(
    r"\b(no|not|don't|do not|sorry|actually|instead|wait|change|make it|rather|hold on|cancel|but|different|"
    r"wrong|never ?mind)\b",
    re.IGNORECASE,
)


def is_confirmation(text: str) -> bool:
    """Whether a caller turn is a plain confirmation (an affirmation with no correction in it)."""
    return bool(_AFFIRM.search(text)) and not _RETRACT.search(text)


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
    history: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "proposal_id": self.proposal_id, "tool": self.tool, "arguments": dict(self.arguments),
            "status": self.status, "proposed_turn": self.proposed_turn, "confirmed_turn": self.confirmed_turn,
            "confirmed_text": self.confirmed_text, "superseded_by": self.superseded_by,
            "correction_turn": self.correction_turn, "correction_text": self.correction_text,
        }


class ConfirmationPolicy:
    """Holds proposals for confirmation-bound tools and answers the gate for them.

    Args:
        tools: Tools that need the caller's confirmation before they run.
        on_change: Called with a proposal whenever it is created or changes status.
        describe: Renders a proposal's arguments for the read-back reason
            (default: ``key=value`` pairs, server context left out).
        hidden_fields: Argument names never shown in reasons (trusted server context).
    """

    def __init__(
        self,
        tools: Iterable[str],
        *,
        on_change: Callable[[Proposal], None] | None = None,
        describe: Callable[[str, Mapping[str, Any]], str] | None = None,
        hidden_fields: Iterable[str] = ("tenant_id", "customer_id"),
    ) -> None:
        self.tools = frozenset(tools)
        self.on_change = on_change
        self.hidden_fields = frozenset(hidden_fields)
        self._describe = describe or self._describe_arguments
        self._turns: dict[int, str] = {}
        self._pending: dict[str, Proposal] = {}
        self.proposals: list[Proposal] = []
        self._ids = itertools.count(1)

    def caller_turn(self, turn_id: int, text: str) -> None:
        """Note a submitted caller turn (trusted: it comes from the user aggregator)."""
        self._turns[turn_id] = text

    def pending(self) -> list[Proposal]:
        """Proposals awaiting confirmation."""
        return list(self._pending.values())

    def rule(self, name: str = "confirmation") -> PolicyRule:
        """The gate rule (applies to the confirmation-bound tools only)."""
        return PolicyRule(name, self.check, tools=self.tools)

    def check(self, request: ToolRequest) -> PolicyVerdict | None:
        """Allow a request the caller confirmed; otherwise hold it as a proposal and ask for confirmation."""
        if request.name not in self.tools:
            return None
        arguments = dict(request.arguments)
        digest = request_hash(request.name, arguments)
        current = self._pending.get(request.name)
        if current is not None and current.request_hash == digest:
            turn, text = self._latest_caller_turn_after(current.proposed_turn, request.turn_id)
            if turn is not None and is_confirmation(text):
                current.status = "confirmed"
                current.confirmed_turn, current.confirmed_text = turn, text
                del self._pending[request.name]
                self._changed(current)
                return None
            return PolicyVerdict("clarify", f"awaiting_confirmation of {current.proposal_id}: the caller has not "
                                            f"confirmed {self._describe(request.name, arguments)} yet; read it back "
                                            "and ask them to confirm")
        proposal = Proposal(f"proposal-{next(self._ids)}", request.name, arguments, digest, request.turn_id)
        self.proposals.append(proposal)
        if current is not None:
            current.status = "superseded"
            current.superseded_by = proposal.proposal_id
            current.correction_turn = request.turn_id
            current.correction_text = self._turns.get(request.turn_id, "")
            self._changed(current)
        self._pending[request.name] = proposal
        self._changed(proposal)
        lead = (f"the caller changed the request; {current.proposal_id} is replaced by {proposal.proposal_id}"
                if current is not None else f"{proposal.proposal_id} is awaiting_confirmation")
        return PolicyVerdict("clarify", f"{lead}: read back {self._describe(request.name, arguments)} and ask the "
                                        "caller to confirm before it is done")

    def _latest_caller_turn_after(self, proposed: int, current: int) -> tuple[int | None, str]:
        later = [t for t in self._turns if proposed < t <= current]
        if not later:
            return None, ""
        turn = max(later)
        return turn, self._turns[turn]

    def _changed(self, proposal: Proposal) -> None:
        if self.on_change is not None:
            self.on_change(proposal)

    def _describe_arguments(self, tool: str, arguments: Mapping[str, Any]) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(arguments.items()) if k not in self.hidden_fields)
        return f"{tool}({shown})"
