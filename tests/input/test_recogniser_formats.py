"""The ending rules on what a real recogniser writes.

Every transcript below is what faster-whisper tiny.en returned for the
project's Piper-voiced caller audio (``tests/input/data/audio_corpus.jsonl``,
``scripts/bench_input.py --audio``), or was quoted from the same pipeline's
earlier runs: dash, dot and space groupings, digit pairs read as decimals,
connector words split in two, phone groupings, spelled letters hyphenated or fused.
"""

from __future__ import annotations

import pytest

from pipecat_harness.input import IdentifierHoldConfig, hold_decision

HOLD, RELEASE = True, False


@pytest.mark.parametrize(("domain", "text", "hold"), [
    # Order numbers: the first part held, the merged turn complete however the groups are written.
    ("retail", "My order number is W3.", HOLD),
    ("retail", "My order number is W3. 3, 2, 3, 3, 2, 1", RELEASE),
    ("retail", "My order number is W60. 72914.", RELEASE),
    ("retail", "My order number is W9. 7-0-4-4-2-6", RELEASE),
    ("retail", "My order number is W6247. One, two, eight.", RELEASE),
    ("retail", "My order number is W-237.", HOLD),
    ("retail", "My order number is W-237-8156", RELEASE),
    ("retail", "My order number is W-237. 8156", RELEASE),
    ("retail", "It's 2-3-7-8-1-5-6", HOLD),
    # Reservation codes: hyphen-spelled letters and digits.
    ("airline", "My confirmation code is C-F-A.", HOLD),
    ("airline", "My confirmation code is C-F-A-0-4-Y.", RELEASE),
    ("airline", "My confirmation code is CFA.", HOLD),  # letters fused into one word
    # Phone numbers in groups.
    ("telecom", "My phone number is 814-329", HOLD),
    ("telecom", "My phone number is 814-329-5512.", RELEASE),
    ("telecom", "My cell was 917.", HOLD),
    # "nine four" read as a decimal, "under score" split in two.
    ("retail", "The zip code is 9.4.", HOLD),
    ("retail", "The zip code is 9.4. 1, 0, 3.", RELEASE),
    ("retail", "My user ID is mia underscore li.", HOLD),
    ("retail", "My user ID is mia underscore li. Under score 8, 0, 2, 0.", RELEASE),
    # Emails keep their dots; the sentence period after a complete one is not a spoken "dot".
    ("retail", "My email is mia.li at", HOLD),
    ("retail", "My email is mia.li@gmail.com.", RELEASE),
    # Spelled names: open while the letters run, complete once other words follow.
    ("retail", "My last name is spelled R-O.", HOLD),
    ("retail", "My last name is spelled KOV.", HOLD),
    ("retail", "My last name is spelled R-O-S-S-I. That's it.", RELEASE),
    ("airline", "My confirmation code is ZrB.", HOLD),
    ("airline", "My confirmation code is BYR. 3-Y-5", RELEASE),
    ("airline", "My confirmation code is ZSP3. M8.", RELEASE),
    # Spoken addresses come back mangled; the dots survive, and the "at" is sometimes dropped.
    ("retail", "My email is ten dot new in", HOLD),
    ("retail", "My email is ten dot new in at gmail.com", RELEASE),
    ("retail", "My email is Omar.petola", HOLD),
    ("retail", "My email is Omar.petola Gmail.com", RELEASE),
    ("retail", "My e-mail is Ava.com exit. Gmail.com.", RELEASE),
    ("retail", "My email is ophia.centosagmail.com", RELEASE),
    ("retail", "My email is the same as before.", RELEASE),
    ("telecom", "My phone number is 6267-10. 8139.", RELEASE),
    ("telecom", "My phone number is 5-4-4-8. 9-0-1-0-4-3", RELEASE),
    ("retail", "My user ID is me underscore Garcia under score 5, 7, 2, 3", RELEASE),
    # Ordinary speech stays untouched.
    ("retail", "I have two items and one of them is the wrong size.", RELEASE),
    ("retail", "It costs 9.99 a month.", RELEASE),
    ("retail", "I bought 2,000 of them.", RELEASE),
])
def test_real_recogniser_formats(domain: str, text: str, hold: bool) -> None:
    decision = hold_decision(text, IdentifierHoldConfig.for_domain(domain))
    assert decision.hold is hold, decision


@pytest.mark.parametrize(("domain", "said", "heard"), [
    # Whisper drops one of a repeated digit or letter from what it writes as one token.
    ("retail", "The item number is six eight four nine six seven seven eight nine eight.",
     "The item number is 684-967-898."),
    ("airline", "My confirmation code is X Z Z four Y six.", "My confirmation code is XZ4Y6."),
])
def test_a_formatted_token_one_short_of_complete_is_what_the_caller_said(domain: str, said: str,
                                                                         heard: str) -> None:
    config = IdentifierHoldConfig.for_domain(domain)
    decision = hold_decision(heard, config)
    assert decision.hold is False and decision.rule.startswith("one_short:"), decision
    # What the caller said, read without the recogniser's drop, is complete too: the turn was whole.
    assert hold_decision(said, config).hold is False


@pytest.mark.parametrize(("domain", "text"), [
    # Split prefixes the same recogniser wrote as one token are further from complete: still held.
    ("telecom", "My phone number is 626-710."),
    ("retail", "The item number is 848-1828."),
    ("airline", "My confirmation code is ZSP3."),
    # One short but said one by one, or followed by a comma or "um": the caller is mid-list.
    ("retail", "The item number is 6 8 4 9 6 7 8 9 8"),
    ("retail", "The item number is 684-967-898, um"),
])
def test_prefixes_a_caller_pauses_after_stay_held(domain: str, text: str) -> None:
    assert hold_decision(text, IdentifierHoldConfig.for_domain(domain)).hold is True
