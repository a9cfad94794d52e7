"""The call state is filled by trusted events with provenance, versioned, and saved to memory or Redis."""

from pipecat_harness.business import ConfirmationPolicy, WorkingStateKeeper, identity_rule, render_state
from pipecat_harness.state import CallStateStore
from pipecat_harness.tools import GateStatus, PolicySet, ToolGate


def test_turns_results_and_decisions_fill_the_three_memories():
    keeper = WorkingStateKeeper("c1", identity_tools=frozenset({"find_user_id_by_email"}))
    keeper.caller_turn(1, "My email is ada@example.com")
    assert keeper.version == 1
    keeper.tool_result("find_user_id_by_email", "call_1", "ada_1234", write=False, turn_id=1)
    keeper.assistant_delivery(generated="I found you. Which order?", heard="I found you.", full=False, turn_id=1)
    keeper.gate_decision("forwarded", {"tool": "issue_refund", "write": True, "tool_call_id": "call_2",
                                       "idempotency_key": "k1"}, None, 1)
    keeper.gate_decision("forwarded", {"tool": "issue_refund", "write": True, "tool_call_id": "call_2",
                                       "idempotency_key": "k1"}, {"status": "executed"}, 1)
    state = keeper.state
    assert [m["role"] for m in state.history] == ["user", "assistant"]
    assert state.history[1]["generated"] == "I found you. Which order?" and state.delivery["delivery"] == "partial"
    verified = state.fact("identity_verified")
    assert verified.value is True and verified.provenance.source == "tool"
    assert verified.provenance.detail == "find_user_id_by_email call_1" and verified.provenance.turn_id == 1
    assert state.fact("customer_id").value == "ada_1234"
    assert state.operations["op-1"]["status"] == "succeeded" and state.operations["op-1"]["idempotency_key"] == "k1"
    assert state.business["find_user_id_by_email"] == "ada_1234"
    rendered = render_state(state)
    assert "read-only" in rendered and "identity_verified=true (tool turn 1)" in rendered
    assert "op-1 issue_refund succeeded" in rendered and "last reply: partial" in rendered


def test_stale_update_is_refused_by_version():
    keeper = WorkingStateKeeper("c1")
    keeper.caller_turn(1, "Book Thursday.")
    seen = keeper.version
    keeper.caller_turn(2, "Sorry, make it Friday.")
    applied = keeper.update(lambda s: s.business.update({"slots": ["thu-18:00"]}), "slow lookup", based_on=seen)
    assert applied is False and "slots" not in keeper.state.business
    assert keeper.refused and "based on version 1" in keeper.refused[0]
    assert keeper.update(lambda s: s.business.update({"slots": ["fri-18:00"]}), "lookup", based_on=keeper.version)


def test_confirmed_arguments_become_facts_with_the_confirming_turn():
    keeper = WorkingStateKeeper("c1")
    policy = ConfirmationPolicy({"schedule_callback"}, on_change=keeper.proposal)
    gate = ToolGate(write_tools={"schedule_callback"}, policies=PolicySet([policy.rule()]))
    import asyncio

    async def run():
        async def backend(arguments):
            return {"status": "booked"}

        gate.new_turn(1)
        policy.caller_turn(1, "Thursday at six please")
        await gate.call("schedule_callback", {"day": "Thursday"}, backend)
        assert keeper.state.pending["confirm:schedule_callback"].value == "proposal-1"
        assert keeper.state.operations["proposal-1"]["status"] == "awaiting_confirmation"
        policy.assistant_heard(1, "A callback on Thursday, shall I book it?")
        gate.new_turn(2)
        policy.caller_turn(2, "Yes.")
        assert (await gate.call("schedule_callback", {"day": "Thursday"}, backend)).status == GateStatus.EXECUTED

    asyncio.run(run())
    fact = keeper.state.fact("schedule_callback.day")
    assert fact.value == "Thursday" and fact.provenance.source == "caller" and fact.provenance.turn_id == 2
    assert "confirm:schedule_callback" not in keeper.state.pending


async def test_identity_rule_holds_account_writes_until_a_trusted_result_verified_the_caller():
    keeper = WorkingStateKeeper("c1", identity_tools=frozenset({"find_user_id_by_email"}))
    gate = ToolGate(write_tools={"issue_refund"},
                    policies=PolicySet([identity_rule(lambda: keeper.identity_verified, {"issue_refund"})]))
    applied = []

    async def refund(arguments):
        applied.append(arguments)
        return {"status": "refunded"}

    held = await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 5, "identity_verified": True}, refund)
    assert held.status == GateStatus.NOT_EXECUTED and "verify the caller's identity" in held.reason
    keeper.tool_result("find_user_id_by_email", "call_1", {"error": "not found"}, write=False, turn_id=1)
    assert not keeper.identity_verified  # a failed lookup verifies nothing
    keeper.tool_result("find_user_id_by_email", "call_2", "ada_1234", write=False, turn_id=1)
    assert (await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 5}, refund)).status == GateStatus.EXECUTED
    assert len(applied) == 1


async def test_state_is_saved_in_order_and_a_moved_store_refuses_the_stale_save(any_store):
    store = CallStateStore(any_store)
    keeper = WorkingStateKeeper("call-save", store=store)
    keeper.caller_turn(1, "Book Thursday.")
    keeper.caller_turn(2, "Sorry, Friday.")
    await keeper.flush()
    saved = await store.load("call-save")
    assert saved.version == keeper.version == 2
    assert [m["content"] for m in saved.history] == ["Book Thursday.", "Sorry, Friday."]
    # Another worker moves the stored state; this worker's next save was based on version 2 and is refused.
    await store.update("call-save", lambda s: s.business.update({"other": True}))
    keeper.caller_turn(3, "Yes.")
    await keeper.flush()
    assert keeper.refused and "based on 2" in keeper.refused[-1]
    assert (await store.load("call-save")).business == {"other": True}
    await keeper.close()
