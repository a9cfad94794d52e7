from __future__ import annotations

from pipecat_harness.decisions import ControlDecision
from pipecat_harness.eval.identifier_splits import identifier_pauses, is_identifier_token, measure_input_waiting
from pipecat_harness.sim.caller import plan_turn
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario
from pipecat_harness.trace.timeline import Timeline, TraceEvent

SPLIT = load_scenario(BUNDLED_DIR / "split_order_number.yaml")
COMPLETE = load_scenario(BUNDLED_DIR / "eval_airline_complete_code_not_held.yaml")


def _timeline(*events: tuple[float, str, str, dict]) -> Timeline:
    return Timeline(TraceEvent(t, lane, kind, data) for t, lane, kind, data in events)


def _finals(scenario, turn: int) -> list[float]:
    return [e.offset for e in plan_turn(scenario.caller[turn], scenario.caller_voice) if e.kind == "final"]


def test_identifier_tokens() -> None:
    assert all(is_identifier_token(t) for t in ["seven", "W", "2", "w237", "whiskey", "dot", "double", "five,"])
    assert not any(is_identifier_token(t) for t in ["order", "refund", "please", "", "..."])


def test_a_pause_inside_an_identifier_is_found_and_ordinary_turns_have_none() -> None:
    pauses = identifier_pauses(SPLIT)
    assert [(p.turn, p.before.split()[-1], p.after.split()[0]) for p in pauses] == [(0, "three", "seven")]
    assert identifier_pauses(COMPLETE) == []


def test_a_submission_between_the_two_halves_is_an_early_submission() -> None:
    first, second = _finals(SPLIT, 0)
    start = 5.0
    early = _timeline((start, "caller", "caller_turn", {"turn": 0}),
                      (start + first + 0.5, "caller", "submitted", {"text": "... W two three"}),
                      (start + second + 0.5, "caller", "submitted", {"text": "seven eight one five six."}))
    figures = measure_input_waiting(SPLIT, early, [])
    assert (figures.identifier_pauses, figures.submitted_early, figures.user_turns) == (1, 1, 2)

    merged = _timeline((start, "caller", "caller_turn", {"turn": 0}),
                       (start + second + 0.5, "caller", "submitted", {"text": "W two three seven eight one five six"}))
    assert measure_input_waiting(SPLIT, merged, []).submitted_early == 0


def test_a_turn_the_caller_never_reached_is_not_an_opportunity() -> None:
    assert measure_input_waiting(SPLIT, _timeline(), []).identifier_pauses == 0


def test_a_hold_on_a_finished_utterance_is_needless_and_its_wait_is_added() -> None:
    timeline = _timeline((5.0, "caller", "caller_turn", {"turn": 0}),
                         (8.0, "caller", "asr_final", {"text": "my zip is one nine one two two"}),
                         (11.0, "caller", "submitted", {"text": "my zip is one nine one two two"}),
                         (20.0, "caller", "caller_turn", {"turn": 1}))
    held = ControlDecision("identifier_hold", "held", {"wait_ms": 2500}, at=8.5)
    figures = measure_input_waiting(SPLIT, timeline, [held])
    assert (figures.holds, figures.needless_holds, figures.added_wait_ms) == (1, 1, 2500)


def test_a_hold_the_caller_resumed_from_costs_nothing() -> None:
    timeline = _timeline((5.0, "caller", "caller_turn", {"turn": 0}),
                         (8.0, "caller", "asr_final", {"text": "W two three"}),
                         (10.0, "caller", "asr_final", {"text": "seven eight"}),
                         (10.5, "caller", "submitted", {"text": "W two three seven eight"}))
    held = ControlDecision("identifier_hold", "held", {}, at=8.5)
    reask = ControlDecision("silent_reply", "reasked", {"added_wait_ms": 1500}, at=30.0)
    figures = measure_input_waiting(SPLIT, timeline, [held, reask])
    assert (figures.holds, figures.needless_holds, figures.added_wait_ms) == (1, 0, 1500)
