import random

import pytest

from pipecat_harness.history import HeardPrefix, estimate_heard_prefix
from pipecat_harness.history.estimator import split_units
from pipecat_harness.sim.sim_tts import speech_duration

SENTENCE = "All set, I have refunded forty five dollars to your card."


def _truth(text: str, played: float, wpm: float = 165.0) -> tuple[int, float, list[tuple[str, float]]]:
    layout = speech_duration(text, wpm)
    heard = sum(1 for _, start, end in layout if (start + end) / 2 <= played)
    total = layout[-1][2] + (0.35 if text.rstrip()[-1] in ".?!" else 0.0)
    return heard, total, [(w, s) for w, s, _ in layout]


def test_word_timestamps_keep_the_words_past_their_middle() -> None:
    heard, _, times = _truth(SENTENCE, 2.0)
    result = estimate_heard_prefix(SENTENCE, played_secs=2.0, word_times=times, bias=0.5)
    assert result.method == "word_timestamps"
    assert result.reliable
    assert result.units_heard == heard
    assert result.text == " ".join(SENTENCE.split()[:heard])


def test_word_timestamps_for_a_prefix_only_never_keep_unstarted_words() -> None:
    _, _, times = _truth(SENTENCE, 0)
    started = [t for t in times if t[1] <= 1.0]
    result = estimate_heard_prefix(SENTENCE, played_secs=5.0, word_times=started)
    assert result.units_heard <= len(started)


def test_audio_length_maps_played_time_within_one_word() -> None:
    rng = random.Random(7)
    for _ in range(200):
        wpm = rng.uniform(130, 200)
        _, total, _ = _truth(SENTENCE, 0, wpm)
        played = rng.uniform(0.05, total)
        heard, _, _ = _truth(SENTENCE, played, wpm)
        result = estimate_heard_prefix(SENTENCE, played_secs=played, audio_secs=total)
        assert result.method in ("audio_length", "complete")
        assert heard - 1 <= result.units_heard <= heard


def test_bias_keeps_less_never_more() -> None:
    _, total, _ = _truth(SENTENCE, 0)
    for played in [0.3, 1.1, 2.2, 3.3]:
        middle = estimate_heard_prefix(SENTENCE, played_secs=played, audio_secs=total, bias=0.5)
        cautious = estimate_heard_prefix(SENTENCE, played_secs=played, audio_secs=total, bias=0.9)
        assert cautious.units_heard <= middle.units_heard


def test_speaking_rate_is_used_without_audio_length() -> None:
    result = estimate_heard_prefix(SENTENCE, played_secs=1.5)
    assert result.method == "speaking_rate"
    assert 0 < result.units_heard < len(SENTENCE.split())
    assert SENTENCE.startswith(result.text)


def test_all_audio_played_is_complete() -> None:
    result = estimate_heard_prefix(SENTENCE, played_secs=10.0, audio_secs=4.0)
    assert result.method == "complete"
    assert result.complete
    assert result.text == SENTENCE


@pytest.mark.parametrize(
    ("text", "played", "reason"),
    [
        ("", 1.0, "no words"),
        ("   ", 1.0, "no words"),
        ("... !!! 🙂", 1.0, "no words"),
        (SENTENCE, 0.0, "no audio played"),
        ("Hi.", 30.0, "still streaming"),
    ],
)
def test_no_reliable_prefix_is_said_so(text: str, played: float, reason: str) -> None:
    result = estimate_heard_prefix(text, played_secs=played)
    assert isinstance(result, HeardPrefix)
    assert not result.reliable
    assert result.method == "none"
    assert result.text == ""
    assert result.confidence == 0.0
    assert reason in result.reason


def test_cyrillic_is_cut_at_a_word_boundary() -> None:
    text = "Ваш возврат уже оформлен. Деньги поступят на карту."
    result = estimate_heard_prefix(text, played_secs=1.2, audio_secs=4.0)
    assert result.reliable
    assert text.startswith(result.text)
    assert result.text == " ".join(text.split()[: len(result.text.split())])


def test_unspaced_script_is_cut_per_character() -> None:
    text = "ご注文の返金が完了しました。"
    assert len(split_units(text)) == 13  # the final 。 attaches to the last character
    result = estimate_heard_prefix(text, played_secs=1.0, audio_secs=3.0)
    assert 0 < result.units_heard < 13
    assert text.startswith(result.text)


def test_emoji_inside_a_sentence_takes_no_time_and_is_kept_in_place() -> None:
    text = "Great 🙂 your refund is done."
    result = estimate_heard_prefix(text, played_secs=0.9, audio_secs=2.0)
    assert result.text.startswith("Great 🙂")


@pytest.mark.parametrize("kwargs", [{"bias": 1.5}, {"bias": -0.1}, {"audio_secs": -1.0}])
def test_invalid_arguments_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        estimate_heard_prefix(SENTENCE, played_secs=1.0, **kwargs)


def test_negative_played_seconds_raise() -> None:
    with pytest.raises(ValueError):
        estimate_heard_prefix(SENTENCE, played_secs=-0.1)


def test_misaligned_word_times_fall_back_to_the_text_model() -> None:
    result = estimate_heard_prefix(SENTENCE, played_secs=1.0, audio_secs=4.0,
                                   word_times=[("completely", 0.0), ("different", 0.3), ("words", 0.6)])
    assert result.method == "audio_length"
