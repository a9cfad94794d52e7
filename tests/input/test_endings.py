"""hold_decision: the ending rules, their presets and the labeled corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecat_harness.input import IdentifierHoldConfig, hold_decision

CORPUS = Path(__file__).parent / "data" / "endings.jsonl"
RETAIL = IdentifierHoldConfig.for_domain("retail")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("A B C", "spelled_letters"),
        ("seven three nine", "digit_run"),
        ("it's 7 3 9", "digit_run"),
        ("A B C dash", "trailing_connector"),
        ("mia underscore", "trailing_connector"),
        ("john dot smith @", "trailing_connector"),
        ("Y as in", "as_in_open"),
        ("sierra mike", "spelled_letters"),
        ("my order number is W two three seven", "prefix:order_id"),
        ("my email is john dot smith at gmail", "prefix:email"),
        ("user id mia underscore li underscore three six", "prefix:user_id"),
        ("the item id is 1 2 3 4 5", "prefix:item_id"),
        ("my order number is", "cue_open"),
        ("the number is seven, uh", "digit_run"),
        ("it's double", "trailing_multiplier"),
    ],
)
def test_open_identifiers_are_held(text: str, rule: str) -> None:
    decision = hold_decision(text, RETAIL)
    assert decision.hold, decision
    assert decision.rule == rule


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("the zip code is 9 4 1 0 3", "complete:zip_code"),
        ("one nine one two two", "complete:zip_code"),
        ("five five five, one two three, four five six seven", "complete:item_id"),
        ("order #W2378156.", "complete:order_id"),
        ("it's W two three seven eight one five six", "complete:order_id"),
        ("mei dot kovacs at example dot com", "complete:email"),
        ("mia underscore li underscore three six six eight", "complete:user_id"),
        ("I have 2 items", "ordinary"),
        ("I'd like 2", "quantity"),
        ("I was born in 1987.", "quantity"),
        ("I'll take option B", "single_letter"),
        ("I'm at home", "ordinary"),
        ("I'll meet you at", "ordinary"),
        ("It came with a dash cam", "ordinary"),
    ],
)
def test_complete_identifiers_and_ordinary_speech_are_not_held(text: str, rule: str) -> None:
    decision = hold_decision(text, RETAIL)
    assert not decision.hold, decision
    assert decision.rule == rule


def test_domain_presets_follow_tau_bench_identifier_formats() -> None:
    airline = IdentifierHoldConfig.for_domain("airline")
    telecom = IdentifierHoldConfig.for_domain("telecom")
    assert (RETAIL.extra_wait_secs, airline.extra_wait_secs, telecom.extra_wait_secs) == (2.5, 2.5, 1.5)
    assert not hold_decision("my confirmation code is K 4 X 9 P 2", airline).hold
    assert hold_decision("my confirmation code is K 4 X 9", airline).rule == "prefix:reservation_code"
    assert hold_decision("my number is four one five, five five five", telecom).rule == "prefix:phone_number"
    assert not hold_decision("my number is four one five, five five five, zero one three four", telecom).hold
    with pytest.raises(ValueError, match="unknown domain"):
        IdentifierHoldConfig.for_domain("banking")


def test_exemptions_are_configurable() -> None:
    plain = IdentifierHoldConfig.length_rules_only()
    assert not hold_decision("seven three nine one two", plain).hold
    strict = IdentifierHoldConfig.length_rules_only(exempt_digit_lengths=frozenset(), exempt_min_digits=12)
    assert hold_decision("seven three nine one two", strict).hold
    assert hold_decision("1 2 3 4 5 6 7 8 9 0", strict).hold


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "Ich möchte zurückgeben", "我想退货", "٣٤٥", "\x00\x01"])
def test_empty_and_non_ascii_text_is_not_held(text: str) -> None:
    assert not hold_decision(text, RETAIL).hold


def test_huge_input_reads_only_the_tail() -> None:
    prefix = "I'd like to talk about my order " * 50_000
    assert hold_decision(prefix + "W two three", RETAIL).rule == "prefix:order_id"
    assert not hold_decision(prefix + "thank you", RETAIL).hold
    # A window that cuts a word in half drops the fragment instead of misreading it.
    assert hold_decision("x" * 1000 + " A B", IdentifierHoldConfig.for_domain("retail", max_chars=16)).hold


def test_text_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="str"):
        hold_decision(None)  # type: ignore[arg-type]


def test_corpus_targets_and_baseline_gap() -> None:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 400

    def rates(config_for: object) -> tuple[float, float, float]:
        held = {i: hold_decision(r["text"], config_for(r["domain"])).hold for i, r in enumerate(rows)}  # type: ignore[operator]
        incomplete = [held[i] for i, r in enumerate(rows) if r["label"] == "incomplete"]
        complete = [held[i] for i, r in enumerate(rows) if r["label"] == "complete"]
        ordinary = [held[i] for i, r in enumerate(rows) if r["label"] == "ordinary"]
        return sum(incomplete) / len(incomplete), sum(complete) / len(complete), sum(ordinary) / len(ordinary)

    catch, false_complete, false_ordinary = rates(IdentifierHoldConfig.for_domain)
    assert catch >= 0.97
    assert false_complete <= 0.02
    assert false_ordinary <= 0.02
    base_catch, base_false, _ = rates(lambda _domain: IdentifierHoldConfig.length_rules_only())
    assert base_catch < catch and base_false > false_complete


@pytest.mark.parametrize(
    ("text", "hold", "rule"),
    [
        ("the line is 415-555-0134", False, "complete:phone_number"),
        ("it's (212) 555-0199", False, "complete:phone_number"),
        ("my number is 415.555.0134", False, "complete:phone_number"),
        ("the line is 415-555", True, "prefix:phone_number"),
        ("my cell is 312-555-", True, "trailing_connector"),
    ],
)
def test_phone_numbers_in_asr_formatting_are_read_as_digits(text: str, hold: bool, rule: str) -> None:
    decision = hold_decision(text, IdentifierHoldConfig.for_domain("telecom"))
    assert (decision.hold, decision.rule) == (hold, rule)


@pytest.mark.parametrize(
    ("text", "hold"),
    [
        ("you can use leipatel at", True),
        ("my address is sam at", True),
        ("what are you looking at", False),
        ("I'm at", False),
        ("I bought it at", False),
    ],
)
def test_a_turn_ending_in_name_at_is_an_address_cut_short(text: str, hold: bool) -> None:
    assert hold_decision(text, IdentifierHoldConfig.for_domain("retail")).hold is hold
