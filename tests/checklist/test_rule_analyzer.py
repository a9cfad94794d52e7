import pytest

from pipecat_harness.checklist.directive import mark_issued, next_directive
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.checklist.progress import ChecklistState
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer

CHECKLIST = bundled_checklist()


def _state_after_asking(*utterances_before: str) -> ChecklistState:
    state = ChecklistState(call_id="c")
    mark_issued(state, next_directive(CHECKLIST, state))
    return state


async def _outcomes(utterance: str, state: ChecklistState | None = None) -> dict[str, str]:
    analysis = await RuleAnalyzer().analyze(CHECKLIST, state or ChecklistState(call_id="c"), utterance)
    return {u.question_id: u.outcome for u in analysis.updates}


@pytest.mark.parametrize(
    ("utterance", "expected"),
    [
        ("No incidents.", {"incidents": "denied"}),
        ("We didn't have any incidents this week.", {"incidents": "denied"}),
        ("There were no incidents or near misses.", {"incidents": "denied", "near_misses": "denied"}),
        # the negation covers "issues"; the incident itself is real, so the item must stay open
        ("No issues with the incident from Monday.", {"incidents": "reported"}),
        ("Nothing to worry about regarding the accident.", {"incidents": "reported"}),
        ("We had an accident on Tuesday.", {"incidents": "reported"}),
        ("No incidents and a near miss on Friday.", {"incidents": "denied", "near_misses": "reported"}),
    ],
)
async def test_negation_scope(utterance: str, expected: dict[str, str]):
    assert await _outcomes(utterance) == expected


async def test_merged_question_marks_both_halves():
    outcomes = await _outcomes("No scheduling conflicts, but a compliance update came in.")
    assert outcomes == {"scheduling_conflicts": "denied", "compliance_updates": "reported"}


async def test_bare_no_answers_every_question_of_the_pair():
    state = _state_after_asking()
    assert state.last_directive["kind"] == "pair"
    assert await _outcomes("Nope.", state) == {"incidents": "denied", "near_misses": "denied"}


async def test_bare_yes_reports_and_unrelated_chatter_changes_nothing():
    state = _state_after_asking()
    assert await _outcomes("Yeah, one.", state) == {"incidents": "reported", "near_misses": "reported"}
    assert await _outcomes("Sorry, who is this again?", state) == {}


async def test_locations_are_collected_and_scope_the_answer():
    analysis = await RuleAnalyzer().analyze(
        CHECKLIST,
        ChecklistState(call_id="c"),
        "We run the warehouse and the yard. At the warehouse, no incidents.",
    )
    assert analysis.locations == ["warehouse", "north yard"]
    assert [(u.question_id, u.outcome, u.location) for u in analysis.updates] == [
        ("incidents", "denied", "warehouse")
    ]


async def test_unexpected_topic_is_picked_up_with_its_wording():
    analysis = await RuleAnalyzer().analyze(
        CHECKLIST, ChecklistState(call_id="c"), "No incidents. Oh, and the client wants to visit on Friday."
    )
    assert analysis.unexpected_topics == ["the client wants to visit on Friday"]
    assert {u.question_id for u in analysis.updates} == {"incidents"}


async def test_a_later_mention_does_not_flip_an_earlier_answer():
    assert await _outcomes("No equipment problems, all equipment is running.") == {"equipment_issues": "denied"}
