"""The recogniser is keyed like a deployment's: its domain's terms and its customers' names, never the caller's ids."""

from __future__ import annotations

import re

import pytest

from pipecat_harness.sim.audio.requirements import missing_audio_packages
from pipecat_harness.sim.audio.vocabulary import DOMAIN_TERMS, recogniser_vocabulary
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

needs_audio = pytest.mark.skipif(bool(missing_audio_packages()),
                                 reason=f"audio mode needs {', '.join(missing_audio_packages())} ([audio] extra)")


@pytest.mark.parametrize("name", ["input_split_email", "eval_airline_dotted_last_name",
                                  "eval_telecom_split_line_number"])
def test_the_vocabulary_holds_the_domain_terms_and_customer_names_but_no_identifier(name: str) -> None:
    scenario = load_scenario(BUNDLED_DIR / f"{name}.yaml")
    vocabulary = recogniser_vocabulary(scenario)
    assert all(term in vocabulary for term in DOMAIN_TERMS[scenario.domain])
    if scenario.database.seed == "retail" or "passengers" in scenario.database.tables:
        assert "Mei Kovacs" in vocabulary
    # Hearing an identifier is what the input controls are tested on: no digit and no code is primed.
    assert not re.search(r"\d", vocabulary)
    assert "@" not in vocabulary and "example" not in vocabulary


@needs_audio
def test_hotwords_are_part_of_the_transcript_key() -> None:
    from pipecat_harness.sim.audio.cache import digest
    from pipecat_harness.sim.audio.recogniser import transcript_key

    audio = b"\x00\x01" * 800
    assert transcript_key(audio) == digest("faster-whisper-tiny.en-int8-seeded", audio)  # cold audio keeps its key
    assert transcript_key(audio, "refund") != transcript_key(audio)
    assert transcript_key(audio, "refund") != transcript_key(audio, "roaming")
    assert transcript_key(audio, "refund") == digest("faster-whisper-tiny.en-int8-seeded", "hotwords", "refund", audio)
    # A prompt changes what is heard too: it keys its own transcript and leaves the unprompted ones as they were.
    assert transcript_key(audio, "refund", "Digits: 3 0 7.") not in (transcript_key(audio, "refund"),
                                                                    transcript_key(audio, "", "Digits: 3 0 7."))


@needs_audio
def test_a_keyed_recogniser_hears_the_domain_word_and_the_split_line_reaches_the_model_once() -> None:
    from pipecat_harness.sim.audio.mode import AudioMode
    from pipecat_harness.sim.runner import run_scenario

    scenario = load_scenario(BUNDLED_DIR / "eval_telecom_split_line_number.yaml")
    result = run_scenario(scenario, audio=AudioMode())
    assert result.caller_completed
    assert result.passed, [c.detail for c in result.checks if not c.ok]
