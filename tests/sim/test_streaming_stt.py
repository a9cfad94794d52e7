"""Text mode that behaves like streaming STT: final pieces, the Finalize answer after the VAD stop, formats."""

from __future__ import annotations

import pytest

from pipecat_harness.sim.asr_format import format_transcript
from pipecat_harness.sim.caller import VAD_STOP_SECS, plan_turn
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, CallerSpec, CallerTurn, SpeechSegment, load_scenario
from pipecat_harness.spoken import written_to_spoken

DEEPGRAM_LIKE = {"final_pieces": 2, "finalize_delay_secs": 0.3, "stt_p99_secs": 0.35}


def test_finals_come_in_pieces_and_the_last_answers_finalize_after_the_vad_stop() -> None:
    voice = CallerSpec(**DEEPGRAM_LIKE, asr_format="deepgram")
    turn = CallerTurn(speech=[SpeechSegment(say="my order number is W two three seven", secs=2.0)])
    events = plan_turn(turn, voice)
    finals = [e for e in events if e.kind == "final"]
    vad_stop = next(e for e in events if e.kind == "vad_stop")
    assert [(f.text, f.finalized, f.closes_segment) for f in finals] == [
        ("My order number is", False, False), ("W 237.", True, True)]
    assert finals[0].offset < 2.0  # while the caller is still speaking
    assert finals[1].offset == pytest.approx(vad_stop.offset + 0.3)  # the Finalize answer
    assert vad_stop.offset == pytest.approx(2.0 + VAD_STOP_SECS)
    assert finals[1].segment_text == "My order number is W 237."
    assert any(e.kind == "interim" for e in events)


@pytest.mark.parametrize(("said", "deepgram", "whisper"), [
    ("my order number is W two three seven", "My order number is W 237.", "My order number is W-237."),
    ("it is C F A zero four Y", "It is C F A 04 Y.", "It is C-F-A-0-4-Y."),
    ("nine four", "94.", "9.4."),
    ("call me at four one five five five five zero one three four", "Call me at 415-555-0134.",
     "Call me at 415-555-0134."),
    ("I want a refund please", "I want a refund please.", "I want a refund please."),
])
def test_recogniser_profiles_write_identifiers_their_way(said: str, deepgram: str, whisper: str) -> None:
    assert format_transcript(said, "deepgram") == deepgram
    assert format_transcript(said, "whisper") == whisper
    assert format_transcript(said, "plain") == said


def test_the_model_reads_recogniser_text_as_the_spoken_words() -> None:
    assert written_to_spoken("It's W-4817. 420.") == "It's W four eight one seven four two zero."
    assert written_to_spoken("My email is mia.li@example.com.") == "My email is mia dot li at example dot com."
    assert written_to_spoken("I want a refund.") == "I want a refund."


@pytest.mark.parametrize("name", ["input_split_order_number", "input_split_email", "input_spelled_name",
                                  "input_split_phone_number"])
def test_split_identifiers_survive_deepgram_ordering(name: str) -> None:
    scenario = load_scenario(BUNDLED_DIR / f"{name}.yaml")
    streaming = scenario.model_copy(update={"caller_voice": scenario.caller_voice.model_copy(update=DEEPGRAM_LIKE)})
    on = run_scenario(streaming, controls=[scenario.control or ""])
    assert on.passed, [c.detail for c in on.checks if not c.ok]
    assert not run_scenario(streaming, controls=[]).passed


@pytest.mark.parametrize("asr_format", ["deepgram", "whisper"])
def test_a_split_order_number_in_recogniser_format_reaches_the_model_whole(asr_format: str) -> None:
    scenario = load_scenario(BUNDLED_DIR / "input_split_order_number.yaml")
    voice = scenario.caller_voice.model_copy(update={**DEEPGRAM_LIKE, "asr_format": asr_format})
    on = run_scenario(scenario.model_copy(update={"caller_voice": voice}), controls=["identifier_hold"])
    assert on.passed, [c.detail for c in on.checks if not c.ok]
    assert [d.action for d in on.decisions if d.control == "identifier_hold"][-1] == "merged"
