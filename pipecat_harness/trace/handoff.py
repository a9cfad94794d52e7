"""The verified handoff summary: what a human taking over the call needs, each line backed by a record.

Built from a call's timeline (its caller turns, tool results, tool-gate
decisions carrying the ledger's idempotency keys, the ledger's settlements —
late replies and reconciliations —, proposal decisions and call-state
snapshots) in the design's shape:

* **Requested**: what the caller asked for — a write they confirmed after hearing it read back;
* **Proposed**: what the agent proposed and the caller did not confirm (declined, expired, open);
* **Verified**: what a trusted result or the caller's confirmation established;
* **Operation**: what each write did, as the ledger settled it (succeeded, failed, outcome unknown);
* **Pending**: what is still open (a proposal awaiting confirmation, an outcome to reconcile);
* **Caller correction**: which request the caller's own words replaced;
* **Agent change**: which request the agent changed without the caller asking.

Each line says who caused it (``cause``: the ``caller``'s turn, the ``agent``'s
action, or the ``system``'s record) and links the real turn, tool result or
ledger event; a link must resolve to an event of the same timeline, and a
statement left without a resolving link is not emitted. A caller's question or
decline is never shown as a confirmation, and an agent's proposal is never
shown as the caller's request.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = ["Handoff", "HandoffLine", "Link", "build_handoff"]

Section = Literal["Requested", "Proposed", "Verified", "Operation", "Pending", "Caller correction", "Agent change"]
SECTIONS: tuple[Section, ...] = ("Requested", "Proposed", "Verified", "Operation", "Pending", "Caller correction",
                                 "Agent change")
Cause = Literal["caller", "agent", "system"]


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

    kind: Literal["caller_turn", "tool_result", "ledger_event"]
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

    def to_text(self) -> str:
        """One statement per line, each followed by its links."""
        if not self.lines:
            return f"Call {self.call_id}: nothing verified to hand off."
        out = [f"Handoff for call {self.call_id}"]
        for section in SECTIONS:
            for line in self.lines:
                if line.section == section:
                    out.append(f"{section}: {line.text}  " + " ".join(link.label() for link in line.links))
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"call_id": self.call_id, "dropped_without_link": self.dropped,
                "lines": [{"section": x.section, "text": x.text, "cause": x.cause,
                           "links": [asdict(k) for k in x.links]} for x in self.lines]}


class _Records:
    """Index of the timeline's records that statements may link to."""

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
        turn = 0
        for number, event in enumerate(timeline.events):
            # An outcome is shown on its decision's row of the trace page (outcome rows are folded in).
            if event.kind == "decision":
                decision_rows[event.data.get("decision_id")] = number
            self.index[id(event)] = (decision_rows.get(event.data.get("decision_id"), number)
                                     if event.kind == "decision_outcome" else number)
            if event.kind == "call_started":
                self.call_id = str(event.data.get("call_id", ""))
            elif event.lane == "caller" and event.kind == "submitted":
                turn += 1
                self.turns[turn] = event
            elif event.lane == "tool" and event.kind == "tool_request":
                self.requests[str(event.data.get("tool_call_id"))] = event
            elif event.lane == "tool" and event.kind == "tool_result":
                self.results[str(event.data.get("tool_call_id"))] = event
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

    def turn_link(self, turn: Any) -> Link | None:
        event = self.turns.get(int(turn)) if isinstance(turn, int | str) and str(turn).isdigit() else None
        if event is None:
            return None
        return Link("caller_turn", str(turn), event.t, _short(str(event.data.get("text", ""))),
                    self.index.get(id(event), -1))

    def result_link(self, tool_call_id: Any) -> Link | None:
        event = self.results.get(str(tool_call_id))
        if event is None:
            return None
        return Link("tool_result", str(tool_call_id), event.t,
                    _short(json.dumps(event.data.get("result"), default=str)), self.index.get(id(event), -1))

    def ledger_link(self, key: Any, label: str) -> Link | None:
        event = self.ledger.get(str(key))
        if event is None:
            return None
        outcome = event.data.get("outcome") or {}
        status = outcome.get("status") if isinstance(outcome, dict) else None
        if event.data.get("action") == "reconciled":
            status = (event.data.get("evidence") or {}).get("status")
        return Link("ledger_event", label, event.t, f"{event.data.get('action')}" + (f" → {status}" if status else ""),
                    self.index.get(id(event), -1))

    def proposal_link(self, proposal_id: str) -> Link | None:
        event = self.proposal_events.get(proposal_id)
        if event is None:
            return None
        return Link("ledger_event", proposal_id, event.t, str(event.data.get("action", "")),
                    self.index.get(id(event), -1))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arguments(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(arguments.items()) if k not in {"tenant_id", "customer_id"})


def build_handoff(timeline: Timeline) -> Handoff:
    """The verified summary of the call on ``timeline``."""
    records = _Records(timeline)
    candidates: list[HandoffLine] = []
    _requests(records, candidates)
    _verified(records, candidates)
    _operations(records, candidates)
    lines = [line for line in candidates if line.links]
    return Handoff(records.call_id, lines, dropped=len(candidates) - len(lines))


def _link_list(*links: Link | None) -> list[Link]:
    """The links that resolved (a statement left with none is dropped)."""
    return [link for link in links if link is not None]


def _requests(records: _Records, out: list[HandoffLine]) -> None:
    """Proposals: confirmed ones are the caller's requests; the rest are the agent's proposals."""
    for proposal in records.proposals.values():
        tool, pid = str(proposal["tool"]), str(proposal["proposal_id"])
        arguments = _arguments(proposal.get("arguments", {}))
        proposed = records.proposal_link(pid)
        status = proposal.get("status")
        if status == "confirmed":
            heard = f" after hearing \"{_short(str(proposal.get('readback') or ''), 60)}\"" \
                if proposal.get("readback") else ""
            out.append(HandoffLine("Requested", f"Caller confirmed {tool}: {arguments}{heard}",
                                   _link_list(records.turn_link(proposal.get("confirmed_turn")), proposed), "caller"))
        elif status == "awaiting_confirmation":
            out.append(HandoffLine("Pending", f"Agent proposed {tool} ({arguments}); it awaits the caller's "
                                              "confirmation and nothing was done",
                                   _link_list(proposed, records.turn_link(proposal.get("proposed_turn"))), "agent"))
        elif status == "declined":
            out.append(HandoffLine("Proposed", f"Caller declined the agent's proposal {tool} ({arguments}); "
                                               "nothing was done",
                                   _link_list(records.turn_link(proposal.get("closed_turn")), proposed), "caller"))
        elif status == "expired":
            out.append(HandoffLine("Proposed", f"Agent proposed {tool} ({arguments}); the caller never confirmed "
                                               "it and it expired; nothing was done", _link_list(proposed), "agent"))
        elif status == "superseded" and proposal.get("superseded_by"):
            replacement = records.proposals.get(str(proposal["superseded_by"]), {})
            new = _arguments(replacement.get("arguments", {}))
            if proposal.get("changed_by") == "caller":
                out.append(HandoffLine("Caller correction", f"{new} supersedes the earlier {arguments} ({tool})",
                                       _link_list(records.turn_link(proposal.get("correction_turn"))), "caller"))
            else:
                out.append(HandoffLine("Agent change", f"Agent changed {tool} from {arguments} to {new}; the "
                                                       "caller did not ask for it",
                                       _link_list(records.proposal_link(str(proposal["superseded_by"]))), "agent"))


def _verified(records: _Records, out: list[HandoffLine]) -> None:
    for name, fact in dict(records.state.get("working") or {}).items():
        provenance = fact.get("provenance") or {}
        if provenance.get("source") != "tool":
            continue  # caller-confirmed facts are stated with their proposal
        tool_call_id = str(provenance.get("detail", "")).rpartition(" ")[2]
        out.append(HandoffLine("Verified", f"{name.replace('_', ' ')}: {fact.get('value')} "
                                           f"(by {str(provenance.get('detail', '')).partition(' ')[0]})",
                               _link_list(records.result_link(tool_call_id)), "system"))


def _operations(records: _Records, out: list[HandoffLine]) -> None:
    """What each write did, as the ledger settled it; the agent's call, linked to the turn it acted in."""
    for op_id, operation in dict(records.state.get("operations") or {}).items():
        if str(op_id).startswith("proposal-") or "confirm with the caller first" in str(operation.get("reason")):
            continue  # proposals and their read-back steps are stated above
        tool = str(operation.get("tool"))
        status = str(operation.get("status"))
        if status in ("not_executed", "blocked") and _held_before_running(operation):
            continue  # a request the gate held for the caller's confirmation or identity: stated as a proposal
        key = operation.get("idempotency_key") or operation.get("tool_call_id")
        ledger = records.ledger_link(key, str(op_id))
        result = records.result_link(operation.get("tool_call_id"))
        request = records.requests.get(str(operation.get("tool_call_id")))
        arguments = f" ({_arguments(dict(request.data.get('arguments') or {}))})" if request is not None else ""
        settled = " (settled by reconciliation)" if operation.get("settled_by") else ""
        if status == "succeeded":
            text = f"{tool}{arguments} succeeded ({op_id}){settled}"
        elif status == "outcome_unknown":
            text = f"{tool}{arguments} outcome unknown ({op_id}); reconcile before retrying"
            out.append(HandoffLine("Pending", f"reconcile {tool} {op_id} with the backend", _link_list(ledger),
                                   "system"))
        elif status == "not_executed":
            text = f"{tool} request not executed: {operation.get('reason') or 'held by the gate'}"
        else:
            text = f"{tool}{arguments} {status.replace('_', ' ')} ({op_id}){settled}"
        out.append(HandoffLine("Operation", f"Agent's {text}",
                               _link_list(ledger, result, records.turn_link(operation.get("turn_id"))), "agent"))


def _held_before_running(operation: dict[str, Any]) -> bool:
    reason = str(operation.get("reason") or "")
    return "awaiting_confirmation" in reason or "read back" in reason or "verify the caller" in reason \
        or "look up" in reason
