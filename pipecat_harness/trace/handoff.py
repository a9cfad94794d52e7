"""The verified handoff summary: what a human taking over the call needs, each line backed by a record.

Built from a call's timeline in sections (:data:`SECTIONS`): writes the caller confirmed, the agent's unconfirmed
proposals, facts a trusted result verified, each write as the ledger settled it, what is still open, and requests the
caller's words or the agent replaced. Each line names its ``cause`` and links the turn, tool result or ledger event of
the same timeline; a statement left without a link is not emitted, a caller's question or decline is never shown as
a confirmation, nor an agent's proposal as the caller's request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = ["Handoff", "HandoffLine", "Link", "build_handoff"]

Section = Literal["Requested", "Proposed", "Verified", "Operation", "Pending", "Caller correction", "Agent change"]
SECTIONS: tuple[Section, ...] = get_args(Section)
Cause = Literal["caller", "agent", "system"]
LinkKind = Literal["caller_turn", "tool_result", "ledger_event"]
_Quote = Callable[[TraceEvent], str]
#: Reasons of a request the gate held for the caller's confirmation or identity before running it.
_HELD_BEFORE_RUNNING = ("awaiting_confirmation", "read back", "verify the caller", "look up")


@dataclass(frozen=True)
class Link:
    """A record supporting a statement.

    Parameters:
        kind: ``caller_turn``, ``tool_result`` or ``ledger_event``.
        ref: Turn number, tool-call id, or operation id / idempotency key.
        t: Time of the event on the call's timeline (seconds).
        quote: A short excerpt of the record.
        index: Position of the event in the timeline (the trace page's row ``e<index>``).
    """

    kind: LinkKind
    ref: str
    t: float
    quote: str = ""
    index: int = -1

    def label(self) -> str:
        """``[turn 2 @14.1s]`` style reference."""
        name = {"caller_turn": "turn", "tool_result": "result", "ledger_event": "ledger"}[self.kind]
        return f"[{name} {self.ref} @{self.t:.1f}s]"


@dataclass
class HandoffLine:
    """One statement of the summary, who caused it, and its supporting links."""

    section: Section
    text: str
    links: list[Link] = field(default_factory=list)
    cause: Cause = "system"


@dataclass
class Handoff:
    """The summary of one call."""

    call_id: str
    lines: list[HandoffLine]
    dropped: int = 0

    @property
    def by_section(self) -> list[HandoffLine]:
        """The lines in section order."""
        return sorted(self.lines, key=lambda line: SECTIONS.index(line.section))

    def to_text(self) -> str:
        """One statement per line, each followed by its links."""
        if not self.lines:
            return f"Call {self.call_id}: nothing verified to hand off."
        out = [f"{x.section}: {x.text}  " + " ".join(link.label() for link in x.links) for x in self.by_section]
        return "\n".join([f"Handoff for call {self.call_id}", *out])

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        lines = [{"section": x.section, "text": x.text, "cause": x.cause, "links": [asdict(k) for k in x.links]}
                 for x in self.lines]
        return {"call_id": self.call_id, "dropped_without_link": self.dropped, "lines": lines}


class _Records:
    def __init__(self, timeline: Timeline) -> None:
        self.turns: dict[int, TraceEvent] = {}
        self.results: dict[str, TraceEvent] = {}
        self.requests: dict[str, TraceEvent] = {}
        self.ledger: dict[str, TraceEvent] = {}
        self.proposals: dict[str, dict[str, Any]] = {}
        self.proposal_events: dict[str, TraceEvent] = {}
        self.state: dict[str, Any] = {}
        self.call_id = ""
        self.index: dict[int, int] = {}
        decision_rows: dict[Any, int] = {}
        for number, event in enumerate(timeline.events):
            decision_id = event.data.get("decision_id")
            # An outcome is shown on its decision's row of the trace page (outcome rows are folded in).
            if event.kind == "decision":
                decision_rows[decision_id] = number
            folded = event.kind == "decision_outcome"
            self.index[id(event)] = decision_rows.get(decision_id, number) if folded else number
            if event.kind == "call_started":
                self.call_id = str(event.data.get("call_id", ""))
            elif event.lane == "caller" and event.kind == "submitted":
                self.turns[len(self.turns) + 1] = event
            elif event.lane == "tool" and event.kind in {"tool_request", "tool_result"}:
                calls = self.requests if event.kind == "tool_request" else self.results
                calls[str(event.data.get("tool_call_id"))] = event
            elif event.lane == "control" and event.kind in {"decision", "decision_outcome"}:
                self._decision(event)
            elif event.lane == "control" and event.kind == "call_state":
                self.state = dict(event.data.get("state") or {})

    def _decision(self, event: TraceEvent) -> None:
        evidence = event.data.get("evidence") or {}
        if event.data.get("control") == "tool_gate" and event.data.get("action") == "reconciled":
            key = evidence.get("idempotency_key")
            if key and str(key) in self.ledger:  # the settlement supersedes what the call saw before
                self.ledger[str(key)] = event
        elif event.data.get("control") == "tool_gate" and evidence.get("write"):
            key = evidence.get("idempotency_key") or evidence.get("tool_call_id")
            if key:
                # The outcome event (succeeded, failed) supersedes the forwarding decision.
                self.ledger[str(key)] = event
                if evidence.get("tool_call_id"):
                    self.ledger[str(evidence["tool_call_id"])] = event
        elif event.data.get("control") == "call_state" and "proposal" in evidence:
            proposal = dict(evidence["proposal"])
            self.proposals[str(proposal["proposal_id"])] = proposal
            self.proposal_events[str(proposal["proposal_id"])] = event

    def _link(self, kind: LinkKind, ref: str, event: TraceEvent | None, quote: _Quote) -> Link | None:
        return None if event is None else Link(kind, ref, event.t, quote(event), self.index.get(id(event), -1))

    def turn_link(self, turn: Any) -> Link | None:
        event = self.turns.get(int(turn)) if isinstance(turn, int | str) and str(turn).isdigit() else None
        return self._link("caller_turn", str(turn), event, lambda e: _short(str(e.data.get("text", ""))))

    def result_link(self, tool_call_id: Any) -> Link | None:
        event = self.results.get(str(tool_call_id))
        return self._link("tool_result", str(tool_call_id), event,
                          lambda e: _short(json.dumps(e.data.get("result"), default=str)))

    def ledger_link(self, key: Any, label: str) -> Link | None:
        return self._link("ledger_event", label, self.ledger.get(str(key)), _ledger_quote)

    def proposal_link(self, proposal_id: str) -> Link | None:
        event = self.proposal_events.get(proposal_id)
        return self._link("ledger_event", proposal_id, event, lambda e: str(e.data.get("action", "")))


def _ledger_quote(event: TraceEvent) -> str:
    outcome = event.data.get("outcome") or {}
    status = outcome.get("status") if isinstance(outcome, dict) else None
    if event.data.get("action") == "reconciled":
        status = (event.data.get("evidence") or {}).get("status")
    return f"{event.data.get('action')}" + (f" → {status}" if status else "")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arguments(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(arguments.items()) if k not in {"tenant_id", "customer_id"})


def _line(section: Section, text: str, cause: Cause, *links: Link | None) -> HandoffLine:
    return HandoffLine(section, text, [link for link in links if link is not None], cause)


def build_handoff(timeline: Timeline) -> Handoff:
    """The verified summary of the call on ``timeline``."""
    records = _Records(timeline)
    candidates: list[HandoffLine] = []
    _requests(records, candidates)
    _verified(records, candidates)
    _operations(records, candidates)
    lines = [line for line in candidates if line.links]
    return Handoff(records.call_id, lines, dropped=len(candidates) - len(lines))


def _requests(records: _Records, out: list[HandoffLine]) -> None:
    turn = records.turn_link
    for proposal in records.proposals.values():
        tool, status = str(proposal["tool"]), proposal.get("status")
        arguments = _arguments(proposal.get("arguments", {}))
        proposed = records.proposal_link(str(proposal["proposal_id"]))
        if status == "confirmed":
            readback = str(proposal.get("readback") or "")
            heard = f' after hearing "{_short(readback, 60)}"' if readback else ""
            text = f"Caller confirmed {tool}: {arguments}{heard}"
            out.append(_line("Requested", text, "caller", turn(proposal.get("confirmed_turn")), proposed))
        elif status == "awaiting_confirmation":
            text = f"Agent proposed {tool} ({arguments}); it awaits the caller's confirmation and nothing was done"
            out.append(_line("Pending", text, "agent", proposed, turn(proposal.get("proposed_turn"))))
        elif status == "declined":
            text = f"Caller declined the agent's proposal {tool} ({arguments}); nothing was done"
            out.append(_line("Proposed", text, "caller", turn(proposal.get("closed_turn")), proposed))
        elif status == "expired":
            text = (f"Agent proposed {tool} ({arguments}); the caller never confirmed it and it expired; "
                    "nothing was done")
            out.append(_line("Proposed", text, "agent", proposed))
        elif status == "superseded" and proposal.get("superseded_by"):
            replacement = str(proposal["superseded_by"])
            new = _arguments(records.proposals.get(replacement, {}).get("arguments", {}))
            if proposal.get("changed_by") == "caller":
                text = f"{new} supersedes the earlier {arguments} ({tool})"
                out.append(_line("Caller correction", text, "caller", turn(proposal.get("correction_turn"))))
            else:
                text = f"Agent changed {tool} from {arguments} to {new}; the caller did not ask for it"
                out.append(_line("Agent change", text, "agent", records.proposal_link(replacement)))


def _verified(records: _Records, out: list[HandoffLine]) -> None:
    for name, fact in dict(records.state.get("working") or {}).items():
        provenance = fact.get("provenance") or {}
        if provenance.get("source") != "tool":
            continue  # caller-confirmed facts are stated with their proposal
        detail = str(provenance.get("detail", ""))
        text = f"{name.replace('_', ' ')}: {fact.get('value')} (by {detail.partition(' ')[0]})"
        out.append(_line("Verified", text, "system", records.result_link(detail.rpartition(" ")[2])))


def _operations(records: _Records, out: list[HandoffLine]) -> None:
    """What each write did, as the ledger settled it; the agent's call, linked to the turn it acted in."""
    for op_id, operation in dict(records.state.get("operations") or {}).items():
        if str(op_id).startswith("proposal-") or "confirm with the caller first" in str(operation.get("reason")):
            continue  # proposals and their read-back steps are stated above
        tool, status, call_id = str(operation.get("tool")), str(operation.get("status")), operation.get("tool_call_id")
        reason = str(operation.get("reason") or "")
        if status in ("not_executed", "blocked") and any(mark in reason for mark in _HELD_BEFORE_RUNNING):
            continue  # a request the gate held for the caller's confirmation or identity: stated as a proposal
        ledger = records.ledger_link(operation.get("idempotency_key") or call_id, str(op_id))
        request = records.requests.get(str(call_id))
        arguments = f" ({_arguments(dict(request.data.get('arguments') or {}))})" if request is not None else ""
        settled = " (settled by reconciliation)" if operation.get("settled_by") else ""
        if status == "succeeded":
            text = f"{tool}{arguments} succeeded ({op_id}){settled}"
        elif status == "outcome_unknown":
            text = f"{tool}{arguments} outcome unknown ({op_id}); reconcile before retrying"
            out.append(_line("Pending", f"reconcile {tool} {op_id} with the backend", "system", ledger))
        elif status == "not_executed":
            text = f"{tool} request not executed: {operation.get('reason') or 'held by the gate'}"
        else:
            text = f"{tool}{arguments} {status.replace('_', ' ')} ({op_id}){settled}"
        links = (ledger, records.result_link(call_id), records.turn_link(operation.get("turn_id")))
        out.append(_line("Operation", f"Agent's {text}", "agent", *links))

