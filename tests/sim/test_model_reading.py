from pipecat_harness.sim.model_reading import decision_matches
from pipecat_harness.sim.model_script import DecisionCondition

ZIP_DECISION = DecisionCondition(user="(?i)yusuf rossi, zip code (?P<zip>[a-z ]+)$")


def _user(text):
    return [{"role": "user", "content": text}]


def test_the_recogniser_punctuation_is_read_as_the_callers_pauses():
    # What Whisper tiny.en wrote for "Yusuf Rossi, zip code one nine one two two" (two stretches of speech, the
    # user aggregator joining them), with and without a prompt.
    for heard in ("Yusuf Rossi   zip code one nine, one two two", "Yusuf Rossi.   zip code 1 9 1 2 2."):
        variables = decision_matches(ZIP_DECISION, _user(heard))
        assert variables is not None, heard
        assert variables["zip"].split() == ["one", "nine", "one", "two", "two"]


def test_pause_marks_do_not_make_other_words_match():
    assert decision_matches(ZIP_DECISION, _user("Yusuf Rossi.   zip code 191.")) is not None  # short, but it says so
    assert decision_matches(ZIP_DECISION, _user("Yusuf Rossi.   My zip code changed.")) is None
    assert decision_matches(ZIP_DECISION, _user("Mei Kovacs.   zip code 2 8 2 3 6.")) is None


def test_a_turn_that_matches_as_written_is_read_as_before():
    condition = DecisionCondition(user="(?i)line is (?P<line>[a-z ,]+)$")
    variables = decision_matches(condition, _user("The line is 2-1-2. 555. 0199"))
    assert variables is not None and variables["line"] == "two one two five five five zero one nine nine"


def test_a_sentence_break_between_two_written_pieces_of_one_code_is_a_pause():
    # Whisper tiny.en with a digits prompt, "Q X seven ... K two P" across a pause.
    condition = DecisionCondition(user="(?i)code is (?P<code>.+)$")
    variables = decision_matches(condition, _user("My booking code is QX7.   K2P."))
    assert variables is not None and variables["code"] == "Q X seven K two P."
