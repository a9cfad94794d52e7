from pipecat_harness.checklist.analysis import Analysis, ItemUpdate
from pipecat_harness.checklist.directive import DEFAULT_MARKER, mark_issued, next_directive
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.checklist.progress import ChecklistState, ItemStatus, apply_analysis

CHECKLIST = bundled_checklist()


def _turn(state: ChecklistState, *updates: ItemUpdate, locations=(), topics=()) -> None:
    apply_analysis(CHECKLIST, state, Analysis(list(updates), list(locations), list(topics)))
    mark_issued(state, next_directive(CHECKLIST, state))


def test_first_directive_pairs_natural_partners_and_every_line_has_the_marker():
    directive = next_directive(CHECKLIST, ChecklistState(call_id="c"))
    assert directive.kind == "pair"
    assert directive.targets == ("incidents", "near_misses")
    rendered = directive.render()
    assert all(line.startswith(DEFAULT_MARKER) for line in rendered.splitlines())
    assert "Were there any safety incidents this week? And any near misses?" in rendered


def test_no_pair_when_the_partner_is_already_closed():
    state = ChecklistState(call_id="c")
    _turn(state, ItemUpdate("near_misses", "denied"))
    directive = next_directive(CHECKLIST, state)
    assert (directive.kind, directive.targets) == ("question", ("incidents",))


def test_report_then_follow_up_then_any_other_then_next_question():
    state = ChecklistState(call_id="c")
    mark_issued(state, next_directive(CHECKLIST, state))
    _turn(state, ItemUpdate("incidents", "reported"), ItemUpdate("near_misses", "denied"))
    assert state.last_directive["kind"] == "follow_up"
    _turn(state, ItemUpdate("incidents", "detail"))
    assert state.last_directive["kind"] == "any_other"
    assert state.last_directive["wording"] == "Any other incidents?"
    _turn(state, ItemUpdate("incidents", "reported"))  # another one
    assert state.last_directive["kind"] == "follow_up"
    assert state.items["incidents"].reports == 2
    _turn(state, ItemUpdate("incidents", "detail"))
    _turn(state, ItemUpdate("incidents", "denied"))
    assert state.status("incidents") == ItemStatus.ANSWERED
    assert state.last_directive["targets"] == ["scheduling_conflicts", "compliance_updates"]


def test_per_location_scoping_when_several_locations_are_mentioned():
    state = ChecklistState(call_id="c")
    _turn(state, locations=["warehouse"])
    assert state.last_directive["targets"] == ["incidents", "near_misses"]  # one location: no scoping
    _turn(state, locations=["north yard"])
    assert state.last_directive["targets"] == ["incidents@warehouse", "near_misses@warehouse"]
    _turn(state, ItemUpdate("incidents", "denied"), ItemUpdate("near_misses", "denied"))
    assert state.last_directive["targets"] == ["incidents@north yard", "near_misses@north yard"]
    _turn(state, ItemUpdate("incidents", "reported", location="north yard"))
    assert state.last_directive["wording"] == "Could you tell me a bit more about the incidents at the north yard?"


def test_answer_given_before_scoping_covers_every_location():
    state = ChecklistState(call_id="c")
    _turn(state, ItemUpdate("incidents", "denied"), ItemUpdate("near_misses", "denied"))
    _turn(state, locations=["warehouse", "main office"])
    assert state.status("incidents@main office") == ItemStatus.DENIED
    assert state.last_directive["kind"] == "pair"
    assert state.last_directive["targets"] == ["scheduling_conflicts", "compliance_updates"]


def test_unexpected_topic_comes_before_returning_to_the_list():
    state = ChecklistState(call_id="c")
    _turn(state, ItemUpdate("incidents", "denied"), topics=["a delivery got lost"])
    assert state.last_directive["kind"] == "topic"
    _turn(state)
    assert state.addressed_topics == ["a delivery got lost"]
    assert state.last_directive["targets"] == ["near_misses"]


def test_closing_flow_emits_exactly_one_step_per_turn():
    state = ChecklistState(call_id="c")
    for question in CHECKLIST.questions:
        state.item(question.id).status = ItemStatus.DENIED
    steps = []
    for _ in range(5):
        directive = next_directive(CHECKLIST, state)
        # asking again inside the same turn does not advance the closing flow
        assert next_directive(CHECKLIST, state) == directive
        mark_issued(state, directive)
        mark_issued(state, directive)
        steps.append(directive.targets[0] if directive.targets else directive.kind)
        apply_analysis(CHECKLIST, state, Analysis())
    assert steps == ["summary", "feedback", "sign_off", "done", "done"]
    assert state.asked == ["closing:summary", "closing:feedback", "closing:sign_off"]


def test_summary_lists_what_was_reported():
    state = ChecklistState(call_id="c")
    for question in CHECKLIST.questions:
        state.item(question.id).status = ItemStatus.DENIED
    state.item("compliance_updates").status = ItemStatus.ANSWERED
    directive = next_directive(CHECKLIST, state)
    assert directive.wording == "To sum up: reported compliance updates. Is that right?"
    assert not directive.end_call


def test_state_roundtrips_through_json():
    state = ChecklistState(call_id="c")
    _turn(state, ItemUpdate("incidents", "reported", note="a slip"), locations=["warehouse"], topics=["x y"])
    again = ChecklistState.from_dict(state.to_dict())
    assert again == state
