"""SpellingNormalizer: rewrites spelling artifacts, leaves everything else untouched."""

from __future__ import annotations

from typing import Any

import pytest
from pipecat.frames.frames import InterimTranscriptionFrame, TranscriptionFrame
from pipecat.tests.utils import run_test

from pipecat_harness.input.spelling import SpellingNormalizer, SpellingRules, normalize_spelling


@pytest.mark.parametrize(
    ("before", "after", "rule"),
    [
        ("my name starts with YAsInYellow", "my name starts with Y as in Yellow", "as_in"),
        ("it's Y-as-in-yellow", "it's Y as in yellow", "as_in"),
        ("order w2378156 please", "order W2378156 please", "letter_digit_runs"),
        ("the code is k4x9p2", "the code is K4X9P2", "letter_digit_runs"),
        ("it's S.M.I.T.H.", "it's S M I T H", "dotted_letters"),
        ("K-O-V-A-C-S is my name", "K O V A C S is my name", "dotted_letters"),
    ],
)
def test_artifacts_are_rewritten(before: str, after: str, rule: str) -> None:
    result = normalize_spelling(before)
    assert result.after == after
    assert result.rules == (rule,)
    assert result.changed


@pytest.mark.parametrize(
    "text",
    [
        "B as in boy, C as in cat",
        "I'm flying from JFK to SFO",
        "Is the 4K TV compatible with USB-C and MP3?",
        "I have an iPhone15 and a PS5",
        "the covid19 rules changed in 2021",
        "it's 1080p at 60fps",
        "the U.S. office",
        "my email is mia2023@gmail.com",
        "Yasin Yellowman called yesterday",
        "I'd like to return the thermostat, thanks!",
        "Café au lait, 我想退货",
        "",
        "order #W2378156",
    ],
)
def test_everything_else_is_left_byte_for_byte(text: str) -> None:
    result = normalize_spelling(text)
    assert result.after == text
    assert result.rules == ()


def test_each_rule_is_switchable() -> None:
    text = "YAsInYellow w2378156 S.M.I.T.H"
    off = normalize_spelling(text, SpellingRules(as_in=False, letter_digit_runs=False, dotted_letters=False))
    assert off.after == text
    only_as_in = normalize_spelling(text, SpellingRules(letter_digit_runs=False, dotted_letters=False))
    assert only_as_in.after == "Y as in Yellow w2378156 S.M.I.T.H"


def test_long_input_is_handled() -> None:
    text = "w2378156 " * 20_000
    assert normalize_spelling(text).after == "W2378156 " * 20_000


async def test_processor_rewrites_final_transcripts_and_records_before_and_after() -> None:
    decisions: list[tuple[str, dict[str, Any]]] = []
    normalizer = SpellingNormalizer(on_rewrite=lambda action, evidence: decisions.append((action, evidence)))
    frames = [
        InterimTranscriptionFrame(text="YAsIn", user_id="c", timestamp="t"),
        TranscriptionFrame(text="YAsInYellow", user_id="c", timestamp="t"),
        TranscriptionFrame(text="I'm flying to JFK", user_id="c", timestamp="t"),
    ]
    down, _ = await run_test(
        normalizer,
        frames_to_send=frames,
        expected_down_frames=[InterimTranscriptionFrame, TranscriptionFrame, TranscriptionFrame],
    )
    assert [f.text for f in down] == ["YAsIn", "Y as in Yellow", "I'm flying to JFK"]
    assert decisions == [("rewritten", {"before": "YAsInYellow", "after": "Y as in Yellow", "rules": ["as_in"]})]


async def test_the_recogniser_frame_keeps_its_raw_text_for_the_trace() -> None:
    """The normalizer forwards a rewritten copy: the frame the trace recorded as raw ASR is not edited."""
    raw = TranscriptionFrame(text="it's S.M.I.T.H.", user_id="u", timestamp="t")
    down, _ = await run_test(SpellingNormalizer(), frames_to_send=[raw], expected_down_frames=[TranscriptionFrame])
    assert raw.text == "it's S.M.I.T.H."
    assert down[0].text == "it's S M I T H" and down[0] is not raw


@pytest.mark.parametrize(
    ("heard", "after", "rule"),
    [
        # What faster-whisper tiny.en wrote for the project's Piper-voiced callers (scripts/bench_input.py --audio).
        (" The zip code is 8.9. ", " The zip code is 8 9. ", "number_readings"),
        (" The zip code is 9.5. ", " The zip code is 9 5. ", "number_readings"),
        (" Under score 7-4-9-0. ", " underscore 7-4-9-0. ", "split_connectors"),
        ("My user ID is me underscore Garcia under score 5, 7, 2, 3",
         "My user ID is me underscore Garcia underscore 5, 7, 2, 3", "split_connectors"),
        ("my account number is 8,066", "my account number is 8066", "number_readings"),
        # "Y E N" after a pause in a spelled last name (the input_spelled_name call, keyed recogniser).
        (" Y-E'd-N ", " Y-E-N ", "spelled_letter_marks"),
    ],
)
def test_recogniser_formats_worth_rewriting(heard: str, after: str, rule: str) -> None:
    result = normalize_spelling(heard)
    assert (result.after, result.rules) == (after, (rule,))


@pytest.mark.parametrize(
    "heard",
    [
        # Whisper formats a model reads correctly as they are, and numbers that are numbers.
        "My order number is W-237-8156",
        "My confirmation code is C-F-A-0-4-Y.",
        "5, 5, 4, 1.",
        "It costs 9.99 a month.",
        "I bought 2,000 of them.",
        "the number is 2.5 times higher",
        "I paid 4.5 for it",
    ],
)
def test_recogniser_formats_kept_as_they_are(heard: str) -> None:
    assert normalize_spelling(heard).after == heard


def test_a_rewritten_number_reading_is_still_held_as_an_open_zip_code() -> None:
    from pipecat_harness.input import IdentifierHoldConfig, hold_decision

    after = normalize_spelling(" The zip code is 8.9. ").after
    decision = hold_decision(after, IdentifierHoldConfig.for_domain("retail"))
    assert decision.hold and decision.identifier == "89"


def test_a_stray_mark_inside_a_spelled_run_goes_before_the_run_is_read_as_letters() -> None:
    # "N G ... U Y E N" in the audio corpus: the continuation after the pause.
    result = normalize_spelling(" U-Y-E'd-N. ")
    assert (result.after, result.rules) == (" U Y E N ", ("spelled_letter_marks", "dotted_letters"))
    for text in ("I'd like a refund, we'd be grateful", "It's A-B, I'd say", "Y-E'd"):
        assert normalize_spelling(text).after == text


def test_new_rules_are_switchable() -> None:
    text = "The zip code is 8.9. Under score"
    assert normalize_spelling(text, SpellingRules(split_connectors=False, number_readings=False)).after == text
    marked = " Y-E'd-N "
    assert normalize_spelling(marked, SpellingRules(spelled_letter_marks=False)).after == marked
