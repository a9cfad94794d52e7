"""The verified customer is the one a verification step's record names, and writes touch only their records;
the working state follows the ledger's settlements."""

from pipecat_harness.business import CustomerVerification, WorkingStateKeeper
from pipecat_harness.tools import GateStatus, PolicySet, ToolGate

STEPS = {"find_user_id_by_name_zip": ["first_name", "last_name", "zip"], "find_user_id_by_email": ["email"]}
MEI = {"user_id": "mei_kovacs_8020", "first_name": "Mei", "last_name": "Kovacs", "zip": "28236"}


def test_a_record_that_does_not_match_the_request_verifies_nobody():
    verification = CustomerVerification(STEPS)
    asked = {"first_name": "Mei", "last_name": "Kovacs", "zip": "19122"}
    assert verification.observe("find_user_id_by_name_zip", asked, MEI) is None  # a lenient backend's other record
    assert verification.observe("find_user_id_by_name_zip", asked, {"user_id": "x"}) is None  # no fields to check
    assert verification.observe("find_user_id_by_email", {"email": "a@b.c"}, {"error": "not found"}) is None
    assert verification.customer is None and len(verification.refused) == 2
    assert verification.observe("get_user_details", {"user_id": "mei_kovacs_8020"}, MEI) is None  # not a step


def test_the_first_verified_customer_stays_the_calls():
    verification = CustomerVerification(STEPS)
    assert verification.observe("find_user_id_by_name_zip", {"first_name": "mei", "last_name": "KOVACS",
                                                             "zip": "28236"}, MEI) == "mei_kovacs_8020"
    other = {"user_id": "yusuf_rossi_9620", "email": "yusuf@example.com"}
    assert verification.observe("find_user_id_by_email", {"email": "yusuf@example.com"}, other) is None
    assert verification.customer == "mei_kovacs_8020" and "not taken" in verification.refused[-1]


async def test_writes_run_only_on_records_the_verified_customer_owns():
    verification = CustomerVerification(STEPS)
    gate = ToolGate(write_tools={"issue_refund"}, policies=PolicySet([verification.rule({"issue_refund"})]))
    applied = []

    async def refund(arguments):
        applied.append(arguments)
        return {"status": "refunded"}

    request = {"order_id": "#W7209932", "amount_usd": 5}
    held = await gate.call("issue_refund", request, refund)
    assert held.status == GateStatus.NOT_EXECUTED and "verify the caller's identity" in held.reason
    verification.observe("find_user_id_by_name_zip", {"first_name": "Mei", "last_name": "Kovacs", "zip": "28236"}, MEI)
    unknown = await gate.call("issue_refund", request, refund)
    assert unknown.status == GateStatus.NOT_EXECUTED and "look up order_id" in unknown.reason
    # Trusted results show who owns what: her profile lists her order; another order belongs to someone else.
    verification.observe("get_user_details", {}, {"user_id": "mei_kovacs_8020", "orders": ["#W7209932"]})
    verification.observe("get_order_details", {}, {"order_id": "#W2378156", "user_id": "yusuf_rossi_9620"})
    other = await gate.call("issue_refund", {"order_id": "#W2378156", "amount_usd": 5}, refund)
    assert other.status == GateStatus.BLOCKED and "does not belong" in other.reason
    assert (await gate.call("issue_refund", {"order_id": "w7209932", "amount_usd": 5}, refund)).status == \
        GateStatus.EXECUTED
    assert applied == [{"order_id": "w7209932", "amount_usd": 5}]


def test_the_keeper_takes_the_customer_from_the_record_not_the_arguments():
    keeper = WorkingStateKeeper("c1", verification=CustomerVerification(STEPS))
    keeper.tool_result("find_user_id_by_name_zip", "t1", {"user_id": "yusuf_rossi_9620", "first_name": "Yusuf",
                                                          "last_name": "Rossi", "zip": "19122"},
                       write=False, turn_id=1, arguments={"first_name": "Mei", "last_name": "Kovacs", "zip": "28236"})
    assert not keeper.identity_verified
    keeper.tool_result("find_user_id_by_name_zip", "t2", MEI, write=False, turn_id=2,
                       arguments={"first_name": "Mei", "last_name": "Kovacs", "zip": "28236", "user_id": "admin"})
    assert keeper.identity_verified and keeper.state.fact("customer_id").value == "mei_kovacs_8020"


def test_the_working_state_follows_settlements_and_ignores_repeats_of_a_settled_write():
    keeper = WorkingStateKeeper("c1")
    write = {"tool": "issue_refund", "write": True, "tool_call_id": "t1", "idempotency_key": "k1"}
    keeper.gate_decision("forwarded", write, {"status": "outcome_unknown"}, 1)
    assert keeper.state.operations["op-1"]["status"] == "outcome_unknown"
    keeper.gate_decision("not_executed", {**write, "tool_call_id": "t2", "reason": "unknown: not again"}, None, 2)
    assert keeper.state.operations["op-1"]["status"] == "outcome_unknown"  # a held repeat settles nothing
    keeper.gate_decision("reconciled", {"tool": "issue_refund", "idempotency_key": "k1", "status": "succeeded",
                                        "source": "late_reply"}, None, 2)
    operation = keeper.state.operations["op-1"]
    assert operation["status"] == "succeeded" and operation["settled_by"] == "late_reply"
    keeper.gate_decision("not_executed", {**write, "tool_call_id": "t3", "reason": "already done"}, None, 3)
    assert keeper.state.operations["op-1"]["status"] == "succeeded" and operation["repeats"] == 2
    # A settlement of an operation this call never saw (another worker's recovered record) adds nothing.
    keeper.gate_decision("reconciled", {"tool": "issue_refund", "idempotency_key": "k9", "status": "failed"}, None, 3)
    assert list(keeper.state.operations) == ["op-1"]
