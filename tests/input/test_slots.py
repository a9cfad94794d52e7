"""The hold reads the slot the agent asked for: which identifier, in which alphabet, and when it is complete."""

from __future__ import annotations

from typing import Any

import pytest
from pipecat.frames.frames import (
    LLMContextAssistantTurnFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_harness.input import IdentifierHoldConfig, hold_decision
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.input.slots import expecting, read_slot

RETAIL = IdentifierHoldConfig.for_domain("retail")
TELECOM = IdentifierHoldConfig.for_domain("telecom")
AIRLINE = IdentifierHoldConfig.for_domain("airline")


@pytest.mark.parametrize(("config", "question", "slot"), [
    (RETAIL, "Could you tell me your order number?", "order_id"),
    (RETAIL, "And what's the zip code on the account?", "zip_code"),
    (RETAIL, "Could you spell your last name for me?", "last_name"),
    (RETAIL, "What's the email address on the account?", "email"),
    (TELECOM, "What's the phone number on the account?", "phone_number"),
    (AIRLINE, "Can I have your confirmation code?", "reservation_code"),
    (RETAIL, "Thanks. I'll look that up. What's the order number?", "order_id"),
])
def test_the_question_names_the_slot(config: IdentifierHoldConfig, question: str, slot: str) -> None:
    expected = expecting(config, question).expected
    assert expected is not None and expected.name == slot


@pytest.mark.parametrize("question", ["How can I help you today?", "I found your order. Is there anything else?"])
def test_a_question_for_no_identifier_expects_none(question: str) -> None:
    assert expecting(RETAIL, question).expected is None


def test_a_tool_schema_pattern_defines_the_complete_form() -> None:
    tools = [{"order_id": {"type": "string", "pattern": "^#?W[0-9]{5}$", "description": "The order id"}}]
    config = expecting(RETAIL, "What's the order id?", tools)
    assert config.expected is not None and config.expected.is_complete("W12345")
    assert not hold_decision("it's W one two three four five", config).hold
    # Without the schema the retail preset wants seven digits, and five are a prefix.
    assert hold_decision("it's W one two three four five", expecting(RETAIL, "What's the order id?")).hold


@pytest.mark.parametrize(("text", "slot", "written"), [
    ("it's W 3-9. 4. 0283.", "order_id", "W3940283"),          # digit groups with dots
    ("It's W two-eight. One five. 457", "order_id", "W2815457"),  # hyphen runs of digit words
    ("It's 8.7201.", "zip_code", "87201"),                       # a zip read as a decimal
    ("My number is 864. Five double eight. 8-double-o-3.", "phone_number", "8645888003"),
    ("my number is four one five, 555, oh one for two", "phone_number", "4155550142"),  # "for" between digits
    ("It's GF as in Frank7H. L3.", "reservation_code", "GF7HL3"),  # the example word fused with the rest
    ("The code is F as in Frank N as in Mary 3", "reservation_code", "FM3"),  # the example word decides
    ("It's W, six, no, sorry, five six, five six, nine seven four", "order_id", "W5656974"),  # a correction
    # "as in" heard as "and in", "three" as "free": each example word names its own letter.
    ("The code in F and in Franckham and in Mary-free MC-6", "reservation_code", "FM3MC6"),
    ("Sure, Santos. S-A-N-T. Oh, S.", "last_name", "SANTOS"),
    ("Sure. Rossy. our OSSI.", "last_name", "ROSSI"),
])
def test_recogniser_spellings_read_into_the_slot_alphabet(text: str, slot: str, written: str) -> None:
    config = {"phone_number": TELECOM, "reservation_code": AIRLINE}.get(slot, RETAIL)
    fmt = next(f for f in (*config.formats, *_name_slot()) if f.name == slot)
    assert read_slot(text, fmt) == written


def _name_slot() -> tuple[Any, ...]:
    from pipecat_harness.input.slots import SPELLED_NAME

    return (SPELLED_NAME,)


@pytest.mark.parametrize(("config", "question", "text", "hold", "rule"), [
    (RETAIL, "What's your order number?", "It's W 3-9.", True, "slot_prefix:order_id"),
    (RETAIL, "What's your order number?", "It's W 3-9. 4. 0283.", False, "complete:order_id"),
    # The recogniser dropped the W: no continuation can put it back in front.
    (RETAIL, "What's your order number?", "It's double loop. 5-6. five, six. 974.", False, "one_short:order_id"),
    (RETAIL, "And the zip code?", "It's seven five", True, "slot_prefix:zip_code"),
    # Eight digits and no W: no continuation makes it an order number.
    (RETAIL, "What's your order number?", "It's number 66, no, sorry, 5-6, 5-6, 9-7-4.", False,
     "not_prefix:order_id"),
    # The recogniser lost the W ("It's not a loop."): the digits are still the start of an order number.
    (RETAIL, "What's your order number?", "It's not a loop. 3.5.", True, "slot_prefix:order_id"),
    (RETAIL, "And the zip code?", "It's 8.7201.", False, "complete:zip_code"),
    # Nine of ten digits, a digit dropped by the recogniser: waiting adds nothing, the agent reads it back.
    (TELECOM, "What's the phone number?", "It's seven double four. six, eight, three. 949.", False,
     "one_short:phone_number"),
    (TELECOM, "What's the phone number?", "My number is 232. Nine.", True, "slot_prefix:phone_number"),
    # Words inside the number that are none of its digits: the recogniser damaged it; waiting will not repair it.
    (TELECOM, "What's the phone number?", "It's 2 5 7   I made one.   I'm 3-3-7.", False, "garbled:phone_number"),
    (RETAIL, "Could you spell your last name?", "Sure, Santos. S-A-N-T.", True, "prefix:last_name"),
    (RETAIL, "Could you spell your last name?", "It's Garcia, G-A-R-C-I-A.", False, "complete:last_name"),
    (RETAIL, "What's the email address?", "My email is omar.co.xitoutlook.com", False, "complete:email_heard"),
    (RETAIL, "What's the email address?", "My email is me dot Santos at", True, "slot_prefix:email"),
])
def test_the_slot_decides(config: IdentifierHoldConfig, question: str, text: str, hold: bool, rule: str) -> None:
    decision = hold_decision(text, expecting(config, question))
    assert (decision.hold, decision.rule) == (hold, rule), decision


def test_a_digit_word_homophone_is_not_read_outside_a_digit_run() -> None:
    fmt = expecting(TELECOM, "What's the phone number?").expected
    assert fmt is not None
    assert read_slot("I want to talk to someone", fmt) == ""


async def test_the_assistant_turn_sets_the_slot_and_a_complete_answer_is_not_held() -> None:
    """The question arrives as Pipecat's assistant-turn frame; the answer it asked for passes at once."""
    decisions: list[tuple[str, dict[str, Any]]] = []
    hold = IdentifierHoldStopStrategy(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.1),
                                      config=IdentifierHoldConfig.for_domain("retail", extra_wait_secs=0.4),
                                      on_decision=lambda a, e: decisions.append((a, e)))
    context = LLMContext()
    aggregator = LLMUserAggregator(context, params=LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(stop=[hold]), user_turn_stop_timeout=5.0))
    frames = [
        LLMContextAssistantTurnFrame(text="And what's the zip code on the account?", timestamp="t"),
        VADUserStartedSpeakingFrame(),
        TranscriptionFrame(text="It's 8.7201.", user_id="caller", timestamp="t"),
        VADUserStoppedSpeakingFrame(),
        SleepFrame(sleep=0.3),
    ]
    await run_test(aggregator, frames_to_send=frames, expected_down_frames=None)
    assert hold.config.expected is not None and hold.config.expected.name == "zip_code"
    assert [m["content"] for m in context.get_messages() if isinstance(m, dict)] == ["It's 8.7201."]
    assert decisions == []  # released as complete: never held


async def test_the_slot_holds_what_the_plain_rules_would_release() -> None:
    """ "It's 8.7201" reads as a decimal to the plain rules; as the zip the agent asked for, three digits are open."""
    hold = IdentifierHoldStopStrategy(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.1),
                                      config=IdentifierHoldConfig.for_domain("retail", extra_wait_secs=0.4))
    hold.expect("And what's the zip code on the account?", tools=[])
    assert hold_decision("It's 8.72", hold.config).hold
    assert not hold_decision("It's 8.72", RETAIL).hold


@pytest.mark.parametrize(("text", "hold"), [
    ("It's not a loop.", True),        # the recogniser's words for "It's W": the order number is coming
    ("I don't have it with me", False),  # not the identifier: the model answers at once
    ("What do you mean?", False),
])
def test_an_answer_with_nothing_of_the_slot_yet(text: str, hold: bool) -> None:
    assert hold_decision(text, expecting(RETAIL, "Could you tell me your order number?")).hold is hold


@pytest.mark.parametrize(("text", "hold"), [
    ("It's large dot per tail.", True),                                # no domain yet
    ("My email is me and I talk after and I'll talk.com", False),     # garbled, but the domain ended
])
def test_the_email_slot_is_open_until_a_domain_ends_it(text: str, hold: bool) -> None:
    assert hold_decision(text, expecting(RETAIL, "What's the email address on the account?")).hold is hold


async def test_the_slot_hold_composes_with_the_silent_reply_guard_on_pipecats_empty_turn() -> None:
    """One aggregator with both: a murmur to a yes/no question is re-asked, a split answer to a slot is merged."""
    from pipecat.turns.empty_user_turn import EmptyUserTurnConfig

    from pipecat_harness.input.silent_reply import SilentReplyGuard, reask_instruction

    decisions: list[tuple[str, dict[str, Any]]] = []
    record = lambda action, evidence: decisions.append((action, evidence))  # noqa: E731
    hold = IdentifierHoldStopStrategy(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.1),
                                      config=IdentifierHoldConfig.for_domain("retail", extra_wait_secs=0.4,
                                                                             slot_wait_secs=0.8),
                                      on_decision=record)
    guard = SilentReplyGuard(window_secs=0.3, on_decision=record)
    context = LLMContext()
    params = LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[hold, guard]),
                                     user_turn_stop_timeout=3.0)
    params.empty_user_turn = EmptyUserTurnConfig()
    aggregator = LLMUserAggregator(context, params=params)
    guard.attach(aggregator)
    frames = [
        LLMContextAssistantTurnFrame(text="I can refund order W2378156. Shall I go ahead?", timestamp="t"),
        VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.1), VADUserStoppedSpeakingFrame(),  # a murmur
        SleepFrame(sleep=0.6),
        LLMContextAssistantTurnFrame(text="Sorry. Could you tell me your order number?", timestamp="t"),
        VADUserStartedSpeakingFrame(),
        TranscriptionFrame(text="It's W 3-9.", user_id="caller", timestamp="t"),
        VADUserStoppedSpeakingFrame(),
        SleepFrame(sleep=0.6),  # past the 0.4 s extra wait: only the slot wait keeps the turn open
        VADUserStartedSpeakingFrame(),
        TranscriptionFrame(text="4. 0283.", user_id="caller", timestamp="t"),
        VADUserStoppedSpeakingFrame(),
        SleepFrame(sleep=0.5),
    ]
    await run_test(aggregator, frames_to_send=frames, expected_down_frames=None)
    messages = context.get_messages()
    assert [m["content"] for m in messages if m.get("role") == "developer"] == [reask_instruction(guard.prompt)]
    assert [m["content"] for m in messages if m.get("role") == "user"] == ["It's W 3-9. 4. 0283."]
    actions = [a for a, _ in decisions]
    assert actions == ["reasked", "held", "resumed", "merged"]
    assert decisions[1][1]["rule"] == "slot_prefix:order_id"
