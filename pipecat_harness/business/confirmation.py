"""Confirmation before writes: a write runs only after the caller confirmed a read-back they heard.

A first request for a confirmation-bound tool becomes a *proposal* ``awaiting_confirmation``; the same request runs
only once the caller's latest turn is a plain confirmation (:mod:`~pipecat_harness.business.replies`) of a read-back
that stated its material arguments as values (:mod:`~pipecat_harness.business.readback`: "$45" does not confirm
$450), or at once when the caller had just assented to such a read-back. A declining turn closes it, ``window_turns``
turns without one expire it, a different request supersedes it (noting whether the caller or the model changed the
values). Only submitted caller turns count, so a retrieved "approve this refund" confirms nothing. With a
``ProposalStore``, :meth:`ConfirmationPolicy.sync` and :meth:`ConfirmationPolicy.save` share proposals between
workers by compare-and-set, so a worker that takes the call over confirms what the caller heard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loguru import logger

from pipecat_harness.business.proposal import Proposal, ProposalStatus
from pipecat_harness.business.readback import material_arguments, unstated_arguments
from pipecat_harness.business.replies import classify_reply, is_confirmation
from pipecat_harness.tools.canonical import request_hash
from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest

if TYPE_CHECKING:
    from pipecat_harness.state.proposal_store import ProposalStore

__all__ = ["ConfirmationPolicy", "Proposal", "ProposalStatus"]


def _trim(turns: dict[int, str], keep: int) -> None:
    for old in sorted(turns)[: max(0, len(turns) - keep)]:
        del turns[old]


def _by_turn(texts: Any) -> dict[int, str]:
    return {int(turn): str(text) for turn, text in dict(texts).items()}


class ConfirmationPolicy:
    """Holds proposals for confirmation-bound tools and answers the gate for them.

    Args:
        tools: Tools that need the caller's confirmation (a callable: asked per request, for a growing set).
        on_change: Called with a proposal whenever it is created or changes status.
        describe: Renders a proposal's arguments for the read-back reason (default: ``key=value`` pairs).
        hidden_fields: Argument names never shown in reasons (trusted server context).
        store: Where the call's proposals are shared with other workers (``None``: this worker only).
        call_id: The call the stored proposals belong to (required with ``store``).
        max_turns: Caller turns kept for judging confirmations.
        window_turns: Caller turns after its proposal within which a proposal can be confirmed; later it expires.
        require_readback: Whether the confirmed read-back must state the material arguments (off only in tests
            without a voice loop).
    """

    def __init__(self, tools: Iterable[str] | Callable[[str], bool], *,
                 on_change: Callable[[Proposal], None] | None = None,
                 describe: Callable[[str, Mapping[str, Any]], str] | None = None,
                 hidden_fields: Iterable[str] = ("tenant_id", "customer_id"), store: ProposalStore | None = None,
                 call_id: str = "", max_turns: int = 20, window_turns: int = 3, require_readback: bool = True) -> None:
        if store is not None and not call_id:
            raise ValueError("a ConfirmationPolicy with a store needs the call_id its proposals belong to")
        if callable(tools):
            self._bound: Callable[[str], bool] = tools
            self.tools: frozenset[str] | None = None
        else:
            self.tools = frozenset(tools)
            self._bound = self.tools.__contains__
        self.on_change = on_change
        self.hidden_fields = frozenset(hidden_fields)
        self._describe = describe or self._describe_arguments
        self._turns: dict[int, str] = {}
        self._heard: dict[int, str] = {}
        self._pending: dict[str, Proposal] = {}
        self.proposals: list[Proposal] = []
        self._seq = 0
        self.store = store
        self.call_id = call_id
        self.max_turns = max_turns
        self.window_turns = window_turns
        self.require_readback = require_readback
        self._version = 0
        self._dirty = False
        self._io = asyncio.Lock()
        self.conflicts: list[str] = []

    def binds(self, tool: str) -> bool:
        """Whether ``tool`` needs the caller's confirmation."""
        return self._bound(tool)

    def caller_turn(self, turn_id: int, text: str) -> None:
        """Note a submitted caller turn (trusted: from the user aggregator); it may decline or expire proposals."""
        self._turns[turn_id] = text
        _trim(self._turns, self.max_turns)
        self._dirty = True
        declined = classify_reply(text) == "decline"
        for tool, proposal in list(self._pending.items()):
            if turn_id <= proposal.proposed_turn:
                continue
            if declined:
                proposal.status = "declined"
            elif turn_id - proposal.proposed_turn > self.window_turns:
                proposal.status = "expired"
            else:
                continue
            proposal.closed_turn, proposal.closed_text = turn_id, text if declined else ""
            del self._pending[tool]
            self._changed(proposal)

    def assistant_heard(self, turn_id: int, text: str) -> None:
        """Note what the caller heard of a reply given during caller turn ``turn_id`` (the played text)."""
        if not text.strip():
            return
        self._heard[turn_id] = f"{self._heard[turn_id]} {text}".strip() if turn_id in self._heard else text
        _trim(self._heard, self.max_turns)
        self._dirty = True

    def pending(self) -> list[Proposal]:
        """Proposals awaiting confirmation."""
        return list(self._pending.values())

    def rule(self, name: str = "confirmation") -> PolicyRule:
        """The gate rule (applies to the confirmation-bound tools only)."""
        return PolicyRule(name, self.check, tools=self.tools)

    def check(self, request: ToolRequest) -> PolicyVerdict | None:
        """Allow a request the caller confirmed; otherwise hold it as a proposal and ask for confirmation."""
        if not self.binds(request.name):
            return None
        arguments = dict(request.arguments)
        digest = request_hash(request.name, arguments)
        current = self._pending.get(request.name)
        if current is not None and current.request_hash == digest:
            return self._judge(current, request, arguments)
        repeats = [p for p in self.proposals if p.request_hash == digest and p.confirmed_turn == request.turn_id]
        if current is None and any(p.status == "confirmed" for p in repeats):
            return None  # a repeat within the confirming turn: the gate answers it as the same operation
        self._seq += 1
        proposal = Proposal(f"proposal-{self._seq}", request.name, arguments, digest, request.turn_id)
        self.proposals.append(proposal)
        if current is not None:
            current.status = "superseded"
            current.superseded_by = proposal.proposal_id
            current.correction_turn = request.turn_id
            after = request.turn_id > current.proposed_turn
            current.correction_text = self._turns.get(request.turn_id, "") if after else ""
            current.changed_by = self._who_changed(current, arguments, request.turn_id)
            self._changed(current)
        if self._confirmed_by_this_turn(proposal, request.turn_id):
            return None
        self._pending[request.name] = proposal
        self._changed(proposal)
        if current is None:
            lead = f"{proposal.proposal_id} is awaiting_confirmation"
        elif current.changed_by == "caller":
            lead = f"the caller changed the request; {current.proposal_id} is replaced by {proposal.proposal_id}"
        else:
            lead = (f"the request differs from {current.proposal_id}, which the caller did not change; "
                    f"{proposal.proposal_id} replaces it")
        ask = f"read back {self._describe(request.name, arguments)} and ask the caller to confirm before it is done"
        return PolicyVerdict("clarify", f"{lead}: {ask}")

    def _judge(self, current: Proposal, request: ToolRequest, arguments: dict[str, Any]) -> PolicyVerdict | None:
        described = self._describe(request.name, arguments)
        # The latest caller turn since the proposal, and the last read-back the caller heard before it.
        turn = max((t for t in self._turns if current.proposed_turn < t <= request.turn_id), default=None)
        text = "" if turn is None else self._turns[turn]
        if turn is None or not is_confirmation(text):
            said = "" if turn is None else f" (their reply {text!r} is not a confirmation)"
            reason = f"the caller has not confirmed {described} yet{said}; read it back and ask them to confirm"
            return PolicyVerdict("clarify", f"awaiting_confirmation of {current.proposal_id}: {reason}")
        heard_turn = max((t for t in self._heard if current.proposed_turn <= t < turn), default=None)
        heard = "" if heard_turn is None else self._heard[heard_turn]
        unstated = unstated_arguments(arguments, heard, self.hidden_fields) if self.require_readback else []
        if unstated:
            current.readback = heard
            self._changed(current)
            values = ", ".join(f"{name}={arguments[name]}" for name in unstated)
            again = f"read back {described} and ask again — nothing was done"
            reason = f"what the caller heard did not state {values}; {again}"
            return PolicyVerdict("clarify", f"awaiting_confirmation of {current.proposal_id}: {reason}")
        del self._pending[request.name]
        self._confirm(current, turn, text, heard)
        return None

    def _confirmed_by_this_turn(self, proposal: Proposal, turn_id: int) -> bool:
        """A request made right after the caller assented to a read-back that stated all its material values."""
        text, heard = self._turns.get(turn_id, ""), self._heard.get(turn_id - 1, "")
        arguments, hidden = proposal.arguments, self.hidden_fields
        stated = bool(material_arguments(arguments, hidden)) and not unstated_arguments(arguments, heard, hidden)
        if not (self.require_readback and heard and is_confirmation(text) and stated):
            return False
        self._confirm(proposal, turn_id, text, heard)
        return True

    def _confirm(self, proposal: Proposal, turn: int, text: str, heard: str) -> None:
        proposal.status, proposal.confirmed_turn = "confirmed", turn
        proposal.confirmed_text, proposal.readback = text, heard
        self._changed(proposal)

    def _who_changed(self, old: Proposal, arguments: Mapping[str, Any], turn_id: int) -> str:
        """``caller`` when a caller turn after the old proposal states the new material values, else ``model``."""
        material = material_arguments(arguments, self.hidden_fields)
        changed = {k: v for k, v in material.items() if old.arguments.get(k) != v}
        words = " ".join(text for t, text in sorted(self._turns.items()) if old.proposed_turn < t <= turn_id)
        if not changed or not words:
            return "model" if not words else "caller"
        return "caller" if not unstated_arguments(changed, words, self.hidden_fields) else "model"

    def _changed(self, proposal: Proposal) -> None:
        self._dirty = True
        if self.on_change is not None:
            self.on_change(proposal)

    def to_document(self) -> dict[str, Any]:
        """The stored form: every proposal, the pending one per tool, the recent caller turns."""
        return {"seq": self._seq, "proposals": [p.to_dict() for p in self.proposals],
                "pending": {tool: p.proposal_id for tool, p in self._pending.items()},
                "turns": {str(turn): text for turn, text in sorted(self._turns.items())},
                "heard": {str(turn): text for turn, text in sorted(self._heard.items())}}

    def _adopt(self, document: Mapping[str, Any]) -> None:
        proposals = [Proposal.from_dict(p) for p in document.get("proposals", [])]
        by_id = {p.proposal_id: p for p in proposals}
        self._pending = {str(tool): by_id[str(pid)] for tool, pid in dict(document.get("pending", {})).items()
                         if str(pid) in by_id}
        self.proposals = proposals
        self._seq = max(int(document.get("seq", 0)), self._seq)
        # Turns this worker saw and has not saved yet stay; the stored ones are added.
        self._turns = {**_by_turn(document.get("turns", {})), **self._turns}
        self._heard = {**_by_turn(document.get("heard", {})), **self._heard}

    async def sync(self) -> None:
        """Take the stored proposals if another worker (or an earlier process) moved them.

        A store that cannot be read leaves this worker's proposals as they are (logged): the gate still asks for
        confirmation, it cannot skip one.
        """
        if self.store is None:
            return
        async with self._io:
            try:
                document, version = await self.store.load(self.call_id)
                if document is not None and version != self._version:
                    self._adopt(document)
                    self._version = version
            except Exception as exc:  # a corrupt record or a store outage must not drop the call
                logger.warning(f"confirmation proposals of {self.call_id!r} not loaded: {type(exc).__name__}: {exc}")

    async def save(self) -> bool:
        """Store this worker's changes; returns whether the store now holds them.

        When another worker saved first the stored document wins (adopted, the conflict noted in
        :attr:`conflicts`): a proposal only this worker made is proposed again on the next request.
        """
        if self.store is None or not self._dirty:
            return True
        async with self._io:
            document = self.to_document()
            try:
                if await self.store.save(self.call_id, document, expected_version=self._version):
                    self._version += 1
                    self._dirty = False
                    return True
                self.conflicts.append(f"call {self.call_id!r}: proposals moved past version {self._version}")
                stored, version = await self.store.load(self.call_id)
                if stored is not None:
                    self._adopt(stored)
                    self._version = version
            except Exception as exc:  # the store is down: this worker still holds the proposal
                logger.warning(f"confirmation proposals of {self.call_id!r} not saved: {type(exc).__name__}: {exc}")
            return False

    def _describe_arguments(self, tool: str, arguments: Mapping[str, Any]) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(arguments.items()) if k not in self.hidden_fields)
        return f"{tool}({shown})"
