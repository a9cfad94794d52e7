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

With a :class:`~pipecat_harness.state.proposals.ProposalStore` the proposals
and the caller turns they are judged against are not only worker memory:
:meth:`ConfirmationPolicy.sync` (before the gate decides) takes the call's
stored document when another worker or an earlier process moved it, and
:meth:`ConfirmationPolicy.save` (after) stores this worker's changes by
compare-and-set. A worker that restarts, or takes the call over, therefore
confirms the proposal the caller heard read back, and a correction made on
one worker replaces the proposal every worker holds.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from pipecat_harness.state.store import await_io
from pipecat_harness.tools.canonical import request_hash
from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest

if TYPE_CHECKING:
    from pipecat_harness.state.proposals import ProposalStore

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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        """Rebuild a proposal from :meth:`to_dict` (the hash is recomputed from tool and arguments).

        Raises:
            ValueError: A field is missing or has the wrong type.
        """
        try:
            tool, arguments = str(data["tool"]), dict(data["arguments"])
            status = str(data["status"])
            if status not in ("awaiting_confirmation", "confirmed", "superseded"):
                raise ValueError(f"unknown proposal status {status!r}")
            return cls(
                str(data["proposal_id"]), tool, arguments, request_hash(tool, arguments), int(data["proposed_turn"]),
                status,  # type: ignore[arg-type]
                _optional_int(data.get("confirmed_turn")), str(data.get("confirmed_text") or ""),
                data.get("superseded_by"), _optional_int(data.get("correction_turn")),
                str(data.get("correction_text") or ""),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a proposal record ({type(exc).__name__}: {exc})") from exc


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


class ConfirmationPolicy:
    """Holds proposals for confirmation-bound tools and answers the gate for them.

    Args:
        tools: Tools that need the caller's confirmation before they run.
        on_change: Called with a proposal whenever it is created or changes status.
        describe: Renders a proposal's arguments for the read-back reason
            (default: ``key=value`` pairs, server context left out).
        hidden_fields: Argument names never shown in reasons (trusted server context).
        store: Where the call's proposals are shared with other workers (``None``: this worker only).
        call_id: The call the stored proposals belong to (required with ``store``).
        max_turns: Caller turns kept for judging confirmations.
    """

    def __init__(
        self,
        tools: Iterable[str],
        *,
        on_change: Callable[[Proposal], None] | None = None,
        describe: Callable[[str, Mapping[str, Any]], str] | None = None,
        hidden_fields: Iterable[str] = ("tenant_id", "customer_id"),
        store: ProposalStore | None = None,
        call_id: str = "",
        max_turns: int = 20,
    ) -> None:
        if store is not None and not call_id:
            raise ValueError("a ConfirmationPolicy with a store needs the call_id its proposals belong to")
        self.tools = frozenset(tools)
        self.on_change = on_change
        self.hidden_fields = frozenset(hidden_fields)
        self._describe = describe or self._describe_arguments
        self._turns: dict[int, str] = {}
        self._pending: dict[str, Proposal] = {}
        self.proposals: list[Proposal] = []
        self._seq = 0
        self.store = store
        self.call_id = call_id
        self.max_turns = max_turns
        self._version = 0
        self._dirty = False
        self._io = asyncio.Lock()
        self.conflicts: list[str] = []

    def caller_turn(self, turn_id: int, text: str) -> None:
        """Note a submitted caller turn (trusted: it comes from the user aggregator)."""
        self._turns[turn_id] = text
        for old in sorted(self._turns)[: max(0, len(self._turns) - self.max_turns)]:
            del self._turns[old]
        self._dirty = True

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
        self._seq += 1
        proposal = Proposal(f"proposal-{self._seq}", request.name, arguments, digest, request.turn_id)
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
        self._dirty = True
        if self.on_change is not None:
            self.on_change(proposal)

    # -- shared with other workers ------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The stored form: every proposal, the pending one per tool, the recent caller turns."""
        return {
            "seq": self._seq,
            "proposals": [p.to_dict() for p in self.proposals],
            "pending": {tool: p.proposal_id for tool, p in self._pending.items()},
            "turns": {str(turn): text for turn, text in sorted(self._turns.items())},
        }

    def _adopt(self, document: Mapping[str, Any]) -> None:
        proposals = [Proposal.from_dict(p) for p in document.get("proposals", [])]
        by_id = {p.proposal_id: p for p in proposals}
        pending = {str(tool): by_id[str(pid)] for tool, pid in dict(document.get("pending", {})).items()
                   if str(pid) in by_id}
        stored_turns = {int(turn): str(text) for turn, text in dict(document.get("turns", {})).items()}
        self.proposals, self._pending = proposals, pending
        self._seq = max(int(document.get("seq", 0)), self._seq)
        # Turns this worker saw and has not saved yet stay; the stored ones are added.
        self._turns = {**stored_turns, **self._turns}

    async def sync(self) -> None:
        """Take the stored proposals if another worker (or an earlier process) moved them.

        A store that cannot be read leaves this worker's proposals as they are
        (logged): the gate still asks for confirmation, it cannot skip one.
        """
        if self.store is None:
            return
        async with self._io:
            try:
                document, version = await await_io(self.store.load(self.call_id))
                if document is not None and version != self._version:
                    self._adopt(document)
                    self._version = version
            except Exception as exc:  # a corrupt record or a store outage must not drop the call
                logger.warning(f"confirmation proposals of {self.call_id!r} not loaded: {type(exc).__name__}: {exc}")

    async def save(self) -> bool:
        """Store this worker's changes; returns whether the store now holds them.

        When another worker saved first the stored document wins (it is
        adopted, and the conflict is noted in :attr:`conflicts`): a proposal
        only this worker made is then proposed again on the next request.
        """
        if self.store is None or not self._dirty:
            return True
        async with self._io:
            document = self.to_document()
            try:
                saved = await await_io(self.store.save(self.call_id, document, expected_version=self._version))
                if saved:
                    self._version += 1
                    self._dirty = False
                    return True
                self.conflicts.append(f"call {self.call_id!r}: proposals moved past version {self._version}")
                stored, version = await await_io(self.store.load(self.call_id))
                if stored is not None:
                    self._adopt(stored)
                    self._version = version
            except Exception as exc:  # the store is down: this worker still holds the proposal
                logger.warning(f"confirmation proposals of {self.call_id!r} not saved: {type(exc).__name__}: {exc}")
            return False

    def _describe_arguments(self, tool: str, arguments: Mapping[str, Any]) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(arguments.items()) if k not in self.hidden_fields)
        return f"{tool}({shown})"
