"""``WorkingStateKeeper``: fills one call's :class:`~pipecat_harness.state.CallState` from what happened.

Trusted code is the only writer: caller turns, tool results, gate decisions, proposals and deliveries become the
conversation log, the working state (facts and pending items with provenance, operations) and the business snapshot.
Every change advances the version (a change based on an older one is refused) and is saved in order, off the loop, to
a :class:`~pipecat_harness.state.CallStateStore`, which refuses a save another worker has moved past.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from loguru import logger

from pipecat_harness.business.confirmation import Proposal
from pipecat_harness.business.permissions import CustomerVerification
from pipecat_harness.business.tool_results import parsed_json, user_safe_fields
from pipecat_harness.state.call_state import CallState, CallStateStore, Fact, Provenance, VersionConflict

__all__ = ["STATE_MESSAGE_MARK", "WorkingStateKeeper", "render_state"]

#: First line of the read-only state message the model sees.
STATE_MESSAGE_MARK = "[call state: maintained by the system, read-only]"

# Statuses a ledger settlement (or a run in progress) set, and the gate's answers to a request it did not run.
_SETTLED = {"succeeded", "failed", "outcome_unknown", "executing"}
_ANSWERED_WITHOUT_RUNNING = {"not_executed", "blocked"}


class WorkingStateKeeper:
    """Keeps and saves one call's state.

    Args:
        call_id: The call.
        store: Where the state is saved (``None``: kept in process only).
        identity_tools: Tools whose successful result verifies the caller (without a ``verification``).
        on_change: Called with ``(state, reason)`` after every change (the trace).
        verification: The verification steps and record ownership; with it, only a step whose returned record
            matched the request verifies the caller, and the verified customer is the record's.
    """

    def __init__(self, call_id: str, *, store: CallStateStore | None = None,
                 identity_tools: frozenset[str] = frozenset(),
                 on_change: Callable[[CallState, str], None] | None = None,
                 verification: CustomerVerification | None = None) -> None:
        self.state = CallState(call_id=call_id)
        self.store = store
        self.identity_tools = identity_tools
        self.verification = verification
        self.on_change = on_change
        self.turn_id = 0
        self._saved_version: int | None = None
        self._saves: asyncio.Queue[dict[str, Any]] | None = None
        self._saver: asyncio.Task[None] | None = None
        self.refused: list[str] = []
        self._operation_ids: dict[str, str] = {}

    @property
    def version(self) -> int:
        """The state's current version."""
        return self.state.version

    @property
    def identity_verified(self) -> bool:
        """Whether a trusted result has verified the caller's identity."""
        fact = self.state.fact("identity_verified")
        return bool(fact and fact.value)

    def update(self, change: Callable[[CallState], Any], reason: str, *, based_on: int | None = None) -> bool:
        """Apply ``change`` (for the trace: ``reason``), advance the version, save and report it.

        Returns ``False`` when the state moved past ``based_on``, the version the change was computed from.
        """
        if based_on is not None and based_on != self.state.version:
            message = f"{reason}: based on version {based_on}, state is at {self.state.version}"
            self.refused.append(message)
            logger.debug(f"call {self.state.call_id}: stale state update refused ({message})")
            return False
        change(self.state)
        self.state.version += 1
        self._save()
        if self.on_change is not None:
            self.on_change(self.state, reason)
        return True

    def caller_turn(self, turn_id: int, text: str) -> None:
        """A submitted caller turn: the turn boundary."""
        self.turn_id = turn_id
        self.update(lambda s: s.add_message("user", text, turn_id=turn_id), f"caller turn {turn_id}")

    def assistant_delivery(self, *, generated: str, heard: str, full: bool, turn_id: int) -> None:
        """How the last reply reached the caller (from the history control's decision)."""
        delivery = "full" if full else "partial"

        def change(state: CallState) -> None:
            message = {"role": "assistant", "content": heard, "generated": generated, "delivery": delivery}
            state.history.append({**message, "turn_id": turn_id})
            state.delivery = {"delivery": delivery, "heard": heard, "turn_id": turn_id}

        self.update(change, f"assistant reply {'played in full' if full else 'partly played'}")

    def tool_result(self, tool: str, tool_call_id: str, result: Any, *, write: bool, turn_id: int,
                    arguments: Mapping[str, Any] | None = None) -> None:
        """An executed tool's result: the business snapshot, and facts a trusted backend established."""
        provenance = Provenance("tool", turn_id, f"{tool} {tool_call_id}")
        if self.verification is not None:
            verified = self.verification.observe(tool, dict(arguments or {}), parsed_json(result))
            customer = verified or ""
        else:
            verified = "yes" if tool in self.identity_tools and _succeeded(result) else None
            customer = _customer_id(result) if verified else ""

        def change(state: CallState) -> None:
            state.set_business({**state.business, tool: user_safe_fields(result)}, provenance)
            if verified:
                state.set_fact("identity_verified", True, provenance)
                if customer:
                    state.set_fact("customer_id", customer, provenance)

        self.update(change, f"{'write' if write else 'read'} result from {tool}")

    def gate_decision(self, action: str, evidence: Mapping[str, Any], outcome: Mapping[str, Any] | None,
                      turn_id: int) -> None:
        """A tool-gate decision on a write: the operation's status, following the ledger's settlement.

        A ``reconciled`` event (a late reply, a reconciliation) settles the operation; a later request the gate
        answered without running it (a repeat of a done or unknown operation) leaves the settled status as it is.
        """
        reconciled = action == "reconciled"
        if not evidence.get("write") and not reconciled:
            return
        key = str(evidence.get("idempotency_key") or evidence.get("tool_call_id") or "")
        if not key:
            return
        if reconciled and key not in self._operation_ids:
            return  # settled before this call's state knew it (a recovered record of another worker)
        operation_id = self._operation_ids.setdefault(key, f"op-{len(self._operation_ids) + 1}")
        status = str(evidence.get("status")) if reconciled else "executing" if action == "forwarded" else action
        if outcome:
            status = {"executed": "succeeded"}.get(str(outcome.get("status")), str(outcome.get("status")))

        def change(state: CallState) -> None:
            fresh = {"operation_id": operation_id, "tool": evidence.get("tool"), "turn_id": turn_id}
            fresh["idempotency_key"] = evidence.get("idempotency_key")
            record = state.operations.setdefault(operation_id, fresh)
            settled = record.get("status") in _SETTLED
            if settled and not reconciled and status in _ANSWERED_WITHOUT_RUNNING:
                record["repeats"] = int(record.get("repeats", 0)) + 1
                return
            record["status"] = status
            if reconciled:
                record["settled_by"] = str(evidence.get("source") or "reconciliation")
                return
            record.update({"tool_call_id": evidence.get("tool_call_id"), "reason": evidence.get("reason", "")})

        self.update(change, f"operation {status}: {evidence.get('tool')}")

    def operation_id(self, key: str) -> str:
        """The id the state shows for the operation with ledger key ``key`` (the key until it has one)."""
        return self._operation_ids.get(key, key)

    def proposal(self, proposal: Proposal) -> None:
        """A confirmation-bound proposal was created, confirmed or superseded."""

        def change(state: CallState) -> None:
            record: dict[str, Any] = {"operation_id": proposal.proposal_id, "tool": proposal.tool}
            record.update(status=proposal.status, arguments=dict(proposal.arguments), turn_id=proposal.proposed_turn)
            record.update(confirmed_turn=proposal.confirmed_turn, superseded_by=proposal.superseded_by)
            state.operations[proposal.proposal_id] = {**record, "correction_turn": proposal.correction_turn}
            key = f"confirm:{proposal.tool}"
            if proposal.status == "awaiting_confirmation":
                proposed = Provenance("model", proposal.proposed_turn, proposal.tool)
                state.pending[key] = Fact(proposal.proposal_id, proposed)
            elif state.pending.get(key) and state.pending[key].value == proposal.proposal_id:
                del state.pending[key]
            if proposal.status == "confirmed" and proposal.confirmed_turn is not None:
                provenance = Provenance("caller", proposal.confirmed_turn, proposal.confirmed_text)
                for name, value in proposal.arguments.items():
                    state.set_fact(f"{proposal.tool}.{name}", value, provenance)

        self.update(change, f"{proposal.proposal_id} {proposal.status}")

    def _save(self) -> None:
        if self.store is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._saves is None:
            self._saves = asyncio.Queue()
            self._saver = loop.create_task(self._save_loop())
        self._saves.put_nowait(self.state.to_dict())

    async def _save_loop(self) -> None:
        assert self._saves is not None and self.store is not None
        while True:
            snapshot = await self._saves.get()
            try:
                change = functools.partial(_replace, snapshot=snapshot)
                await self.store.update(self.state.call_id, change, expected_version=self._saved_version)
                self._saved_version = snapshot["version"]
            except VersionConflict as exc:
                self.refused.append(str(exc))
                logger.warning(f"call state not saved: {exc}")
            except Exception as exc:  # the store is down: the call goes on with the in-process state
                logger.warning(f"call state not saved: {type(exc).__name__}: {exc}")
            finally:
                self._saves.task_done()

    async def flush(self) -> None:
        """Wait until every change so far is saved."""
        if self._saves is not None:
            await self._saves.join()

    async def close(self) -> None:
        """Save what is left and stop the saver."""
        await self.flush()
        if self._saver is not None:
            self._saver.cancel()


def _replace(state: CallState, snapshot: dict[str, Any]) -> None:
    fresh = CallState.from_dict(snapshot)
    for name in ("history", "working", "business", "business_provenance", "pending", "operations", "delivery"):
        setattr(state, name, getattr(fresh, name))
    # The store advances the version itself; keep it equal to the in-process version.
    state.version = fresh.version - 1


def _succeeded(result: Any) -> bool:
    if isinstance(result, Mapping):
        return "error" not in result and str(result.get("status", "ok")) not in {"failed", "not_found", "error"}
    return result is not None and not (isinstance(result, str) and result.lower().startswith("error"))


def _customer_id(result: Any) -> str:
    if isinstance(result, Mapping):
        return next((str(result[key]) for key in ("customer_id", "user_id") if result.get(key)), "")
    return str(result) if isinstance(result, str | int) else ""


def render_state(state: CallState, *, max_chars: int = 1200) -> str:
    """A compact read-only rendering for the model: facts with provenance, pending items, operations."""
    lines = [f"{STATE_MESSAGE_MARK} version {state.version}"]
    facts = [f"{name}={json.dumps(f.value, default=str)} ({f.provenance.source} turn {f.provenance.turn_id})"
             for name, f in state.working.items()]
    pending = [f"{name}={f.value}" for name, f in state.pending.items()]
    operations = [f"{op_id} {record.get('tool')} {record.get('status')}" for op_id, record in state.operations.items()]
    lines += [f"{label}: " + "; ".join(items) for label, items in
              (("confirmed", facts), ("pending", pending), ("operations", operations[-8:])) if items]
    if state.delivery:
        lines.append(f"last reply: {state.delivery.get('delivery')}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
