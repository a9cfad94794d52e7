import pytest

from pipecat_harness.grader.actions import InMemoryOperations
from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import Verdict


async def grade(constraints: ConstraintList, text: str, caller: str | None = None,
                ops: tuple[str, ...] = ()) -> list[Verdict]:
    ledger = InMemoryOperations()
    for op in ops:
        ledger.record("call-1", op)
    return await RuleGrader(constraints, ledger).grade(text, caller, call_id="call-1")


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("The basic detail is one forty-nine.", "px_basic"),
        ("A basic detail runs a hundred and forty-nine dollars.", "px_basic"),
        ("Headlight restoration is fifty-nine ninety-nine.", "px_headlight"),
        ("It's $99 for the interior detail, and it's $149 for the basic detail.", None),
    ],
)
async def test_listed_prices_are_supported(constraints: ConstraintList, text: str, ref: str | None) -> None:
    verdicts = await grade(constraints, text)
    assert verdicts and all(v.verdict == "supported" and v.category == "price" for v in verdicts)
    if ref:
        assert verdicts[0].constraint_ref == ref


@pytest.mark.parametrize(
    ("text", "rationale"),
    [
        ("The basic detail is one twenty-nine.", "quoted $129 but basic detail is listed at $149"),
        ("The basic detail is 149 euros.", "quoted €149 but basic detail is listed at $149"),
        ("The basic detail is somewhere between $120 and $160.", "quoted $120-$160"),
        ("Premium is two ninety-nine.", "premium detail is listed at $249"),
        ("Right now the premium detail is 30 percent off.", "no promotion gives 30% off"),
    ],
)
async def test_wrong_prices_currencies_and_ranges_are_unsupported(
    constraints: ConstraintList, text: str, rationale: str
) -> None:
    verdicts = await grade(constraints, text)
    flagged = [v for v in verdicts if v.verdict == "unsupported"]
    assert flagged and flagged[0].category == "price"
    assert rationale in flagged[0].rationale


async def test_amounts_pair_with_the_service_they_follow_even_across_sentences(constraints: ConstraintList) -> None:
    both = await grade(constraints, "Basic is $149, premium is $249.")
    assert [(v.verdict, v.constraint_ref) for v in both] == [("supported", "px_basic"), ("supported", "px_premium")]
    later = await grade(constraints, "Premium detail? That one's two twenty-nine.")
    assert [(v.verdict, v.constraint_ref) for v in later] == [("unsupported", "px_premium")]


async def test_hours(constraints: ConstraintList) -> None:
    ok = await grade(constraints, "Sunday we're closed, but Monday we open at 8.")
    assert [v.verdict for v in ok] == ["supported", "supported"]
    wrong = await grade(constraints, "On Saturday we're open 10 to 4.")
    assert wrong[0].verdict == "unsupported" and wrong[0].constraint_ref == "hours.sat"
    zone = await grade(constraints, "Hours are 8 am to 6 pm Pacific, Monday through Friday.")
    assert ("unsupported", "timezone") in [(v.verdict, v.constraint_ref) for v in zone]


async def test_policies_are_read_as_statements(constraints: ConstraintList) -> None:
    credit = await grade(constraints, "We don't do cash refunds, but we can give you store credit.")
    assert [v.verdict for v in credit] == ["supported"]
    cash = await grade(constraints, "Sure, we can give you a cash refund.")
    assert (cash[0].verdict, cash[0].constraint_ref) == ("unsupported", "policies.refund")
    window = await grade(constraints, "You can reschedule for free up to 48 hours before.")
    assert window[0].verdict == "unsupported" and "free up to 24 hours before" in window[0].rationale
    fee = await grade(constraints, "There's a 25 dollar cancellation fee under 24 hours notice.")
    assert [v.verdict for v in fee] == ["supported"]


async def test_capabilities(constraints: ConstraintList) -> None:
    assert (await grade(constraints, "I can book that appointment for you."))[0].verdict == "supported"
    assert (await grade(constraints, "I can ship that to you."))[0].verdict == "unsupported"
    assert (await grade(constraints, "We also do window tinting."))[0].category == "capability"
    assert await grade(constraints, "I can't process refunds myself, but I can connect you with the manager.") == []


async def test_action_claims_need_a_succeeded_operation(constraints: ConstraintList) -> None:
    done = await grade(constraints, "I've updated your address.", ops=("modify_order_address",))
    assert (done[0].verdict, done[0].category, done[0].constraint_ref) == (
        "supported", "action", "ledger.modify_order_address")
    missing = await grade(constraints, "Your refund is submitted.", ops=("modify_order_address",))
    assert (missing[0].verdict, missing[0].category) == ("unsupported", "action")
    assert "succeeded: modify_order_address" in missing[0].rationale
    from_caller = await grade(constraints, "Done, you're all set.", caller="Please cancel my order.")
    assert from_caller[0].verdict == "unsupported" and "cancel" in from_caller[0].rationale
    promise = await grade(constraints, "I'll book it once you confirm the time.")
    assert [v.category for v in promise] == ["capability"]  # an offer, not a claim that it was done


async def test_without_a_ledger_action_claims_are_out_of_scope(constraints: ConstraintList) -> None:
    verdicts = await RuleGrader(constraints).grade("I've cancelled your order.")
    assert [(v.verdict, v.category) for v in verdicts] == [("out_of_scope", "action")]


@pytest.mark.parametrize(
    "text",
    ["Thanks for calling, how can I help?", "Let me transfer you to someone who can help.",
     "I'm sorry, I can't help with that.", "What day works best for you?", "", "   "],
)
async def test_utterances_with_no_claims_get_no_verdict(constraints: ConstraintList, text: str) -> None:
    assert await grade(constraints, text) == []


@pytest.mark.parametrize(
    ("text", "ops", "flagged"),
    [
        ("Your appointment is cancelled.", ("book_appointment",), True),  # the booking is not the cancellation
        ("Your appointment is cancelled.", ("cancel_appointment",), False),
        ("Your order has been canceled and the refund is on its way.", ("cancel_pending_order",), True),
        ("Your order has been canceled and the refund is on its way.", ("cancel_pending_order", "issue_refund"),
         False),
        ("A confirmation text has been sent to your phone.", ("send_sms_confirmation",), False),
        ("I've sent the return label to your email.", ("return_items",), True),
        ("I've put you down for a ceramic coating next Tuesday.", (), True),
        ("The shipping address is now 45 Pine Road.", (), True),
    ],
)
async def test_every_action_a_completion_claim_names_must_have_succeeded(
    constraints: ConstraintList, text: str, ops: tuple[str, ...], flagged: bool
) -> None:
    verdicts = [v for v in await grade(constraints, text, ops=ops) if v.category == "action"]
    assert verdicts and any(v.flagged for v in verdicts) == flagged, verdicts


@pytest.mark.parametrize(
    ("text", "ops", "flagged"),
    [
        ("Alright, your whitening is booked.", ("reschedule_appointment",), True),  # moving a booking makes none
        ("I've switched your appointment to the morning slot.", ("reschedule_appointment",), False),
        ("Okay, the order's cancelled.", (), True),
        ("The refund has gone back to your original payment method.", ("issue_refund",), False),
    ],
)
async def test_more_ways_of_saying_done(
    constraints: ConstraintList, text: str, ops: tuple[str, ...], flagged: bool
) -> None:
    verdicts = [v for v in await grade(constraints, text, ops=ops) if v.category == "action"]
    assert verdicts and any(v.flagged for v in verdicts) == flagged, verdicts
