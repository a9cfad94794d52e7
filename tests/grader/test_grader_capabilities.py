"""Capability claims: transfers, look-ups, messages, callbacks, checked against what the tenant can do."""

import pytest

from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import SETTLED_CONFIDENCE
from tests.grader.conftest import DATA


@pytest.fixture
def dental() -> ConstraintList:
    return ConstraintList.load(DATA / "dental.yaml")


@pytest.fixture
def retail() -> ConstraintList:
    return ConstraintList.load(DATA / "retail.yaml")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("I can transfer you to our manager, Dave, right now.", "no transfer capability"),
        ("I can pull up your payment history from our billing system.", "look up payment history"),
        ("I'm texting you a confirmation code now.", "send code confirmation by sms"),
        ("Someone will call you back at 4 pm today.", "callback at a time"),
        ("I'll schedule a callback for tomorrow at 9.", "callback at a time"),
    ],
)
def test_the_designs_capability_claims_are_flagged_on_its_tenant(
    constraints: ConstraintList, text: str, why: str
) -> None:
    verdicts = RuleGrader(constraints).check(text)
    flagged = [v for v in verdicts if v.flagged]
    assert [v.category for v in flagged] == ["capability"], verdicts
    assert why in flagged[0].rationale
    assert not any(v.verdict == "supported" and v.category == "capability" for v in verdicts)


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("I can transfer you to Maria, our office manager.", "staff.staff_maria"),
        ("Let me put you through to Dr. Patel's line.", "staff.staff_patel"),
        ("Let me transfer you to the office manager.", "staff.staff_maria"),
        ("I'll connect you with our billing team.", "staff.staff_billing"),
        ("Let me pull up your patient file.", "integrations.int_patients"),
        ("Let me check the calendar for openings next week.", "integrations.int_calendar"),
        ("I'll text you a confirmation for the appointment.", "capabilities.send_sms_confirmation"),
        ("I can have someone call you back tomorrow at ten.", "capabilities.schedule_callback"),
    ],
)
def test_backed_capability_claims_are_supported(dental: ConstraintList, text: str, ref: str) -> None:
    verdicts = RuleGrader(dental).check(text)
    assert [(v.verdict, v.constraint_ref) for v in verdicts if v.category == "capability"] == [("supported", ref)]
    assert not any(v.flagged for v in verdicts)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("I can transfer you to Dr. Nguyen.", "not on the staff list"),
        ("Let me connect you with Karen in billing.", "not on the staff list"),
        ("I'll email you a coupon for your next visit.", "send coupon by email"),
        ("I'll send you a discount code by text.", "send code discount by sms"),
        ("I can look up your lab results in our system.", "look up lab results"),
    ],
)
def test_a_capability_is_no_licence_for_a_different_person_channel_or_record(
    dental: ConstraintList, text: str, why: str
) -> None:
    flagged = [v for v in RuleGrader(dental).check(text) if v.flagged]
    assert len(flagged) == 1 and flagged[0].category == "capability" and why in flagged[0].rationale


@pytest.mark.parametrize(
    "text",
    [
        "Let me transfer you to someone who can help with that.",
        "Let me get a manager on the line for you.",
        "I'm not sure, let me have someone call you back.",
        "I can't transfer calls, but I can take your number for the manager.",
        "I'm not able to look up payment records, sorry.",
        "Let me check on that for you.",
        "Let me look up your appointment.",
    ],
)
def test_referrals_refusals_and_backed_lookups_are_not_flagged(constraints: ConstraintList, text: str) -> None:
    assert not any(v.flagged for v in RuleGrader(constraints).check(text))


def test_a_refused_clause_does_not_hide_an_offered_one(constraints: ConstraintList) -> None:
    verdicts = RuleGrader(constraints).check("I can't book that today, but I can transfer you to Dave.")
    assert [(v.verdict, v.category) for v in verdicts] == [("unsupported", "capability")]


def test_lookups_read_the_integrations(retail: ConstraintList) -> None:
    grader = RuleGrader(retail)
    [order] = grader.check("Let me pull up your order status.")
    assert (order.verdict, order.constraint_ref) == ("supported", "integrations.int_orders")
    [stock] = grader.check("I can check the stock at our downtown store for you.")
    assert stock.verdict == "unsupported" and "stock" in stock.rationale


def test_capability_verdicts_are_left_to_the_model_in_combined_mode(constraints: ConstraintList) -> None:
    verdicts = RuleGrader(constraints).check("I can book you for Tuesday. We have an opening at three.")
    assert {v.verdict for v in verdicts} == {"supported", "out_of_scope"}
    assert all(v.confidence < SETTLED_CONFIDENCE for v in verdicts)
