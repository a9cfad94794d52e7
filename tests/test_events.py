from pipecat_harness.decisions import DecisionLog
from pipecat_harness.events import CallEvents, GateDecided, ReplyDelivered


def test_events_reach_only_the_subscribers_of_their_type_in_order():
    events, seen = CallEvents(), []
    events.subscribe(GateDecided, lambda e: seen.append(("first", e.decision.action)))
    events.subscribe(GateDecided, lambda e: seen.append(("second", e.outcome)))
    events.subscribe(ReplyDelivered, lambda e: seen.append(("reply", e.heard)))
    events.publish(GateDecided(DecisionLog("c").record("tool_gate", "forwarded"), outcome=True))
    events.publish(ReplyDelivered(turn_id=1, generated="a b", heard="a", retained="a", full=False))
    events.publish(object())  # nobody subscribed: nothing happens
    assert seen == [("first", "forwarded"), ("second", True), ("reply", "a")]


def test_the_call_state_control_follows_the_gate_and_the_history_through_typed_events():
    from pipecat_harness.config import HarnessConfig
    from pipecat_harness.harness import Harness

    harness = Harness(HarnessConfig.preset("retail"), call_id="c-events")
    gate, history = harness.control("tool_gate"), harness.control("history")
    call_state = harness.control("call_state")
    decision = gate.record("forwarded", {"tool": "issue_refund", "write": True, "idempotency_key": "k1"})
    assert [op["status"] for op in call_state.keeper.state.operations.values()] == ["executing"]
    gate.gate.decisions.outcome(decision, {"status": "executed"})
    assert [op["status"] for op in call_state.keeper.state.operations.values()] == ["succeeded"]
    history._on_decision("interrupted", {"generated_text": "Your refund is done. Anything else?",
                                          "heard_text": "Your refund", "retained_text": "Your refund"})
    assert call_state.keeper.state.delivery == {"delivery": "partial", "heard": "Your refund", "turn_id": 0}
