"""Policy claims are checked for their conditions; descriptions of listed services make no claim."""

import pytest

from pipecat_harness.grader.conditions import read_conditions
from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.numbers import read_numbers, tokenize
from tests.grader.conftest import DATA


def policy_flags(constraints: ConstraintList, text: str) -> list[bool]:
    return [v.flagged for v in RuleGrader(constraints).check(text) if v.category == "policy"]


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        # free reschedule up to 24 h before
        ("You can reschedule for free even on the same day.", True),
        ("Rescheduling two days ahead is free.", False),
        ("Rescheduling is free if you give us at least a day's notice.", False),
        ("We'll reschedule you for free up to an hour before.", True),
        ("Rescheduling is free as long as you call by the morning of your appointment.", True),
        # $25 fee under 24 h notice
        ("There's a $25 fee if you cancel on the same day.", False),
        ("If you cancel two days out, there's a $25 fee.", True),
        ("Cancelling more than 24 hours ahead doesn't cost anything.", False),
        ("You can cancel the night before without any fee.", True),
        ("There's no cancellation fee at all.", True),
        ("Cancelling with less than 24 hours notice has a $40 fee.", True),
    ],
)
def test_policy_conditions(constraints: ConstraintList, text: str, flagged: bool) -> None:
    assert policy_flags(constraints, text) == [flagged]


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("Returns are accepted within 30 days of delivery.", False),
        ("Returns are accepted within 30 days of purchase.", True),
        ("It's been more than 30 days since delivery, so it can't be returned.", False),
        ("You have 60 days to return it.", True),
        ("The refund will go back to the card you paid with.", False),
        ("We can refund that as store credit instead.", True),
    ],
)
def test_window_anchor_and_payment_method(text: str, flagged: bool) -> None:
    assert policy_flags(ConstraintList.load(DATA / "retail.yaml"), text) == [flagged]


def test_payment_timing() -> None:
    dental = ConstraintList.load(DATA / "dental.yaml")
    assert policy_flags(dental, "You can pay after your insurance processes the claim.") == [True]
    assert policy_flags(dental, "We ask for payment when you come in for the visit.") == [False]
    assert policy_flags(dental, "We offer a payment plan for crowns.") == [True]


def test_conditions_read_words_and_kinds() -> None:
    def read(text: str) -> list[tuple[float, str]]:
        return [(c.hours, c.kind) for c in read_conditions(read_numbers(tokenize(text)))]

    assert read("free with at least a day's notice") == [(24.0, "at_least")]
    assert read("a fee inside 48 hours") == [(48.0, "under")]
    assert read("three days ahead is free") == [(72.0, "case")]
    assert read("free even on the same day") == [(4.0, "case")]
    assert read("it arrived two weeks ago, within the 30-day window") == [(336.0, "case"), (720.0, "under")]


@pytest.mark.parametrize(
    "text",
    [
        "The premium detail includes everything in the basic one plus waxing.",
        "The interior detail covers the seats, carpets and dashboard.",
        "Ceramic coating is a protective layer we apply over the paint.",
        "Basic is one forty-nine and takes about two hours.",
    ],
)
def test_descriptions_of_listed_services_are_not_flagged(constraints: ConstraintList, text: str) -> None:
    assert not any(v.flagged for v in RuleGrader(constraints).check(text))
