from pipecat_harness.sim.caller import VAD_STOP_SECS, plan_turn
from pipecat_harness.sim.scenario import CallerSpec, CallerTurn, SpeechSegment


def kinds(events):
    return [e.kind for e in events]


def test_speech_becomes_vad_interims_and_a_final_transcript():
    turn = CallerTurn(speech=[SpeechSegment(say="one two three four", secs=2.0)])
    events = plan_turn(turn, CallerSpec(asr_final_secs=0.3, interim_every_words=2))
    assert kinds(events) == ["vad_start", "interim", "vad_stop", "final"]
    assert events[1].text == "one two"
    assert events[2].offset == 2.0 + VAD_STOP_SECS
    assert events[3].offset == 2.3 and events[3].text == "one two three four"


def test_a_pause_splits_speech_into_two_vad_segments():
    turn = CallerTurn(speech=[SpeechSegment(say="A B C dash", secs=1.0), SpeechSegment(pause=1.5),
                              SpeechSegment(say="seven", secs=0.4)])
    events = plan_turn(turn, CallerSpec(interim_every_words=10))
    assert kinds(events) == ["vad_start", "vad_stop", "final", "vad_start", "vad_stop", "final"]
    assert events[3].offset == 2.5


def test_a_pause_shorter_than_vad_stop_window_is_not_a_gap():
    turn = CallerTurn(speech=[SpeechSegment(say="A B", secs=1.0), SpeechSegment(pause=0.1),
                              SpeechSegment(say="C", secs=0.5)])
    events = plan_turn(turn, CallerSpec(interim_every_words=10))
    assert kinds(events) == ["vad_start", "vad_stop", "final"]
    assert events[-1].text == "A B C"


def test_silent_speech_has_no_transcript():
    events = plan_turn(CallerTurn(speech=[SpeechSegment(silent=0.4)]), CallerSpec())
    assert kinds(events) == ["vad_start", "vad_stop"]


def test_asr_text_can_differ_from_what_was_said():
    turn = CallerTurn(speech=[SpeechSegment(say="Y as in yellow", asr="YAsInYellow")])
    assert plan_turn(turn, CallerSpec())[-1].text == "YAsInYellow"
