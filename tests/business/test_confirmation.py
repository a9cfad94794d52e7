"""A confirmation-bound write runs only after the caller confirmed a read-back they heard, stating its values."""

import pytest

from pipecat_harness.business import ConfirmationPolicy, classify_reply, is_confirmation, unstated_arguments
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


READ_BACK_THURSDAY = "Thursday at six in the evening, Singapore time. Shall I book it?"


def caller(gate, policy, turn, text):
    gate.new_turn(turn)
    policy.caller_turn(turn, text)


def agent(policy, turn, heard):
    """The reply the caller heard during ``turn`` (what the history control reports as played)."""
    policy.assistant_heard(turn, heard)


@pytest.mark.parametrize("text, confirms", [
    ("Yes.", True), ("yes please", True), ("Yeah, go ahead", True), ("Correct.", True), ("That's right", True),
    ("Yes, that's right, thanks.", True), ("Okay, do it.", True),
    ("Sorry, make it Friday.", False), ("Yes but make it Friday", False), ("No.", False),
    ("Hmm, let me check my calendar first.", False), ("Actually, wait", False), ("", False),
    ("Yes?", False), ("Okay, and what would that refund look like?", False), ("yeah I guess", False),
    ("Yes, but only half of it.", False), ("Right, so how long does that take", False), ("Sure, maybe later", False),
])
def test_what_counts_as_confirmation(text, confirms):
    assert is_confirmation(text) is confirms


@pytest.mark.parametrize("text, kind", [
    ("No.", "decline"), ("No thanks, I'll keep it.", "decline"), ("Don't do that.", "decline"),
    ("Cancel that please", "decline"), ("Yes?", "other"), ("Yes please", "confirm"),
])
def test_declines_are_told_apart(text, kind):
    assert classify_reply(text) == kind


@pytest.mark.parametrize("arguments, heard, missing", [
    ({"amount_usd": 42.5, "order_id": "#W2378156"}, "I'll refund forty-two fifty on order W two three seven eight "
     "one five six.", []),
    ({"amount_usd": 42.5}, "That's $42.50 back to your card.", []),
    ({"amount_usd": 42.5}, "That's forty two dollars and fifty cents.", []),
    ({"amount_usd": 450}, "I'll refund forty five dollars.", ["amount_usd"]),
    ({"amount_usd": 450}, "I'll refund four hundred fifty dollars.", []),
    ({"order_id": "#W2378156", "reason": "damaged item"}, "Refund order W2378156?", []),
    ({"order_id": "#W2378156"}, "Refund order W2378157?", ["order_id"]),
    ({"day": "Thursday", "time": "18:00", "timezone": "Asia/Singapore"}, READ_BACK_THURSDAY, []),
    ({"day": "Friday", "time": "18:00"}, READ_BACK_THURSDAY, ["day"]),
])
def test_read_back_is_compared_as_values(arguments, heard, missing):
    assert unstated_arguments(arguments, heard) == missing


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
    agent(policy, 1, READ_BACK_THURSDAY)
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
    agent(policy, 1, READ_BACK_THURSDAY)
    caller(gate, policy, 2, "Sorry, make it Friday.")
    corrected = await gate.call("schedule_callback", FRIDAY, backend)
    assert corrected.status == GateStatus.NOT_EXECUTED and "replaced" in corrected.reason
    thursday, friday = policy.proposals
    assert thursday.status == "superseded" and thursday.superseded_by == friday.proposal_id
    assert thursday.correction_turn == 2 and thursday.correction_text == "Sorry, make it Friday."
    assert thursday.changed_by == "caller"
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
        agent(policy, turn - 1, READ_BACK_THURSDAY)
        caller(gate, policy, turn, text)
        result = await gate.call("schedule_callback", THURSDAY, backend)
        assert result.status == GateStatus.NOT_EXECUTED and "has not confirmed" in result.reason
    assert backend.booked == [] and policy.pending()[0].status == "awaiting_confirmation"


async def test_a_question_and_a_hedged_yes_do_not_confirm_and_a_plain_yes_then_does():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "Can I get a callback Thursday at six?")
    await gate.call("schedule_callback", THURSDAY, backend)
    for turn, text in ((2, "Yes?"), (3, "Yes, but will they call my mobile?")):
        agent(policy, turn - 1, READ_BACK_THURSDAY)
        caller(gate, policy, turn, text)
        held = await gate.call("schedule_callback", THURSDAY, backend)
        assert held.status == GateStatus.NOT_EXECUTED and "not a confirmation" in held.reason
    agent(policy, 3, "They will call the number on your account. " + READ_BACK_THURSDAY)
    caller(gate, policy, 4, "Yes.")
    assert (await gate.call("schedule_callback", THURSDAY, backend)).status == GateStatus.EXECUTED
    assert len(backend.booked) == 1


async def test_a_declined_proposal_stays_closed_and_a_later_yes_about_something_else_runs_nothing():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "What would a Thursday callback look like?")
    await gate.call("schedule_callback", THURSDAY, backend)
    agent(policy, 1, READ_BACK_THURSDAY)
    caller(gate, policy, 2, "No, don't book anything.")
    assert policy.proposals[0].status == "declined" and policy.proposals[0].closed_turn == 2
    assert policy.pending() == []
    agent(policy, 2, "Okay. Is there anything else, like your order status?")
    caller(gate, policy, 3, "Yes, please.")
    late = await gate.call("schedule_callback", THURSDAY, backend)
    # The repeat is a new proposal, to be read back and confirmed on its own; nothing ran.
    assert late.status == GateStatus.NOT_EXECUTED and backend.booked == []
    assert [p.status for p in policy.proposals] == ["declined", "awaiting_confirmation"]


async def test_a_proposal_expires_after_its_turn_window():
    policy = ConfirmationPolicy({"schedule_callback"}, window_turns=2)
    gate = ToolGate(write_tools={"schedule_callback"}, policies=PolicySet([policy.rule()]))
    backend = Backend()
    caller(gate, policy, 1, "Book Thursday at six.")
    await gate.call("schedule_callback", THURSDAY, backend)
    agent(policy, 1, READ_BACK_THURSDAY)
    caller(gate, policy, 2, "Let me think.")
    caller(gate, policy, 3, "Tell me about returns.")
    agent(policy, 3, "Returns are free within 30 days. Anything else?")
    caller(gate, policy, 4, "Yes.")
    assert policy.proposals[0].status == "expired" and policy.proposals[0].closed_turn == 4
    # The late yes answered another question; the repeat is a new proposal, held.
    assert (await gate.call("schedule_callback", THURSDAY, backend)).status == GateStatus.NOT_EXECUTED
    assert backend.booked == [] and policy.proposals[1].status == "awaiting_confirmation"


async def test_a_yes_to_one_amount_does_not_run_a_proposal_of_ten_times_it():
    policy = ConfirmationPolicy({"issue_refund"})
    gate = ToolGate(write_tools={"issue_refund"}, policies=PolicySet([policy.rule()]))
    backend = Backend()
    large = {"order_id": "#W2378156", "amount_usd": 450, "reason": "damaged"}
    caller(gate, policy, 1, "My thermostat arrived broken.")
    await gate.call("issue_refund", large, backend)
    agent(policy, 1, "I can refund forty five dollars on order W2378156. Shall I go ahead?")
    caller(gate, policy, 2, "Yes.")
    held = await gate.call("issue_refund", large, backend)
    assert held.status == GateStatus.NOT_EXECUTED and "did not state amount_usd=450" in held.reason
    assert backend.booked == [] and policy.proposals[0].status == "awaiting_confirmation"
    # Read back as it is, and confirmed: now it runs.
    agent(policy, 2, "Sorry, to be exact: four hundred fifty dollars on order W2378156. Shall I?")
    caller(gate, policy, 3, "Yes, go ahead.")
    assert (await gate.call("issue_refund", large, backend)).status == GateStatus.EXECUTED
    assert policy.proposals[0].readback.startswith("Sorry, to be exact")


async def test_a_change_the_caller_did_not_say_is_the_models():
    policy = ConfirmationPolicy({"issue_refund"})
    gate = ToolGate(write_tools={"issue_refund"}, policies=PolicySet([policy.rule()]))
    backend = Backend()
    caller(gate, policy, 1, "My thermostat arrived broken.")
    await gate.call("issue_refund", {"order_id": "#W2378156", "amount_usd": 45}, backend)
    agent(policy, 1, "I can refund forty five dollars on order W2378156. Shall I?")
    caller(gate, policy, 2, "Yes.")
    changed = await gate.call("issue_refund", {"order_id": "#W2378156", "amount_usd": 450}, backend)
    assert changed.status == GateStatus.NOT_EXECUTED and "did not change" in changed.reason
    assert policy.proposals[0].changed_by == "model" and backend.booked == []


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


async def test_a_model_that_reads_back_before_calling_needs_one_yes_and_only_for_what_was_read():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "Can I get a callback Thursday at six?")
    agent(policy, 1, READ_BACK_THURSDAY)
    caller(gate, policy, 2, "Yes, please.")
    # Friday was never read back: the yes to Thursday does not run it; Thursday, read back and agreed to, runs.
    assert (await gate.call("schedule_callback", FRIDAY, backend)).status == GateStatus.NOT_EXECUTED
    assert (await gate.call("schedule_callback", THURSDAY, backend)).status == GateStatus.EXECUTED
    assert backend.booked == [THURSDAY]
    friday, thursday = policy.proposals
    assert friday.status == "superseded" and thursday.status == "confirmed"
    assert thursday.confirmed_turn == thursday.proposed_turn == 2 and thursday.readback == READ_BACK_THURSDAY


async def test_a_yes_to_a_reply_that_read_nothing_back_confirms_nothing():
    gate, policy = make_gate()
    backend = Backend()
    caller(gate, policy, 1, "Can I get a callback Thursday at six?")
    agent(policy, 1, "Sure, anything else while I have you?")
    caller(gate, policy, 2, "Yes, please.")
    assert (await gate.call("schedule_callback", THURSDAY, backend)).status == GateStatus.NOT_EXECUTED
    assert backend.booked == [] and policy.pending()[0].proposed_turn == 2
