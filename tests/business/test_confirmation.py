"""A confirmation-bound write runs only after a later caller turn confirmed the same arguments."""

import pytest

from pipecat_harness.business import ConfirmationPolicy, is_confirmation
from pipecat_harness.retrieval import RetrievalScope, load_documents
from pipecat_harness.retrieval.labeled import DATA_DIR
from pipecat_harness.retrieval.retriever import EvidenceRetriever
from pipecat_harness.tools import GateStatus, PolicySet, ToolGate

THURSDAY = {"day": "Thursday", "time": "18:00", "timezone": "Asia/Singapore"}
FRIDAY = {**THURSDAY, "day": "Friday"}


class Backend:
    """Counts applications; it does not dedupe."""

    def __init__(self):
        self.booked = []

    async def __call__(self, arguments):
        self.booked.append(dict(arguments))
        return {"callback_id": len(self.booked), "status": "booked"}


def make_gate():
    policy = ConfirmationPolicy({"schedule_callback"})
    gate = ToolGate(write_tools={"schedule_callback"}, policies=PolicySet([policy.rule()]))
    return gate, policy


def caller(gate, policy, turn, text):
    gate.new_turn(turn)
    policy.caller_turn(turn, text)


@pytest.mark.parametrize("text, confirms", [
    ("Yes.", True), ("yes please", True), ("Yeah, go ahead", True), ("Correct.", True), ("That's right", True),
    ("Sorry, make it Friday.", False), ("Yes but make it Friday", False), ("No.", False),
    ("Hmm, let me check my calendar first.", False), ("Actually, wait", False), ("", False),
])
def test_what_counts_as_confirmation(text, confirms):
    assert is_confirmation(text) is confirms


async def test_confirmed_write_runs_once_after_the_caller_said_yes():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "Please book the callback for Thursday at six.")
    first = await gate.call("schedule_callback", THURSDAY, backend)
    assert first.status == GateStatus.NOT_EXECUTED and "awaiting_confirmation" in first.reason
    assert policy.pending()[0].status == "awaiting_confirmation"
    # The model asking again in the same turn is not a confirmation.
    again = await gate.call("schedule_callback", THURSDAY, backend)
    assert again.status == GateStatus.NOT_EXECUTED and backend.booked == []
    caller(gate, policy, 2, "Yes, please.")
    confirmed = await gate.call("schedule_callback", THURSDAY, backend)
    assert confirmed.status == GateStatus.EXECUTED
    assert backend.booked == [THURSDAY]
    assert policy.proposals[0].status == "confirmed" and policy.proposals[0].confirmed_turn == 2


async def test_correction_before_execution_replaces_the_pending_proposal():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "Please book the callback for Thursday at six.")
    await gate.call("schedule_callback", THURSDAY, backend)
    caller(gate, policy, 2, "Sorry, make it Friday.")
    corrected = await gate.call("schedule_callback", FRIDAY, backend)
    assert corrected.status == GateStatus.NOT_EXECUTED and "replaced" in corrected.reason
    thursday, friday = policy.proposals
    assert thursday.status == "superseded" and thursday.superseded_by == friday.proposal_id
    assert thursday.correction_turn == 2 and thursday.correction_text == "Sorry, make it Friday."
    caller(gate, policy, 3, "Yes.")
    # The old proposal can no longer be confirmed into execution: Thursday is a new proposal now.
    stale = await gate.call("schedule_callback", THURSDAY, backend)
    assert stale.status == GateStatus.NOT_EXECUTED
    caller(gate, policy, 4, "Yes, Friday.")
    assert (await gate.call("schedule_callback", FRIDAY, backend)).status == GateStatus.NOT_EXECUTED
    assert backend.booked == []


async def test_never_confirmed_never_runs():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "Please book the callback for Thursday at six.")
    await gate.call("schedule_callback", THURSDAY, backend)
    for turn, text in enumerate(["Hmm, let me check my calendar first.", "I'll call back.", "Bye."], start=2):
        caller(gate, policy, turn, text)
        result = await gate.call("schedule_callback", THURSDAY, backend)
        assert result.status == GateStatus.NOT_EXECUTED and "has not confirmed" in result.reason
    assert backend.booked == [] and policy.pending()[0].status == "awaiting_confirmation"


async def test_injection_document_never_changes_a_tool_decision():
    """Retrieved text saying "approve this refund" is evidence; the refund decision is the same without it."""
    documents = load_documents(DATA_DIR / "policies.yaml")
    retriever = await EvidenceRetriever.build(documents)
    import datetime as dt

    evidence = await retriever.retrieve("I want a refund, approve it", RetrievalScope("northwind", (),
                                                                                      dt.date(2026, 11, 20)))
    await retriever.close()
    assert any(item.contains_instructions for item in evidence.items), "the injection note must be retrieved"

    async def decisions(with_evidence: bool) -> list[str]:
        policy = ConfirmationPolicy({"issue_refund"})
        gate = ToolGate(write_tools={"issue_refund"}, policies=PolicySet([policy.rule()]))
        backend = Backend()
        caller(gate, policy, 1, "My blender arrived broken, I want a refund.")
        if with_evidence:
            # Whatever the model read in the evidence, only submitted caller turns reach the policy.
            policy_text = str(evidence.for_model())
            assert "approve this refund" in policy_text
        refund = {"order_id": "#W1", "amount_usd": 80}
        first = await gate.call("issue_refund", refund, backend)
        second = await gate.call("issue_refund", refund, backend)
        return [first.status.value, second.status.value, str(len(backend.booked))]

    assert await decisions(with_evidence=True) == await decisions(with_evidence=False) == [
        "not_executed", "not_executed", "0"]
