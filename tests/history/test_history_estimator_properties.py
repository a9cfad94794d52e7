"""Property: without word timestamps, history never keeps a word whose audio had not started.

The real voice is built from the estimator's own units with every word and
pause running at its own speed, within the bounds the estimator accounts for:
with the audio length known, each word and pause within 6% of the model at
any overall rate; with it unknown (synthesis still streaming), the voice up to
1.3x slower than the rate assumed, each word and pause within 10% of that.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipecat_harness.history import PlaybackTracker, ReplyPlayback, SpokenSegment
from pipecat_harness.history.estimator import (
    DEFAULT_CHARS_PER_SEC,
    estimate_heard_prefix,
    layout_units,
    split_units,
)

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=11)
_MIXED = " ".join(["international"] * 9 + ["a", "b", "c", "d", "e", "f", "g", "h", "i"])


def _factors(bound: float) -> st.SearchStrategy[tuple[float, float, float]]:
    return st.tuples(st.floats(0.0, 1.0), st.floats(1 - bound, 1 + bound), st.floats(1 - bound, 1 + bound))


_SENTENCE = st.builds(
    lambda words, ends: " ".join(w + e for w, e in zip(words, ends, strict=False)),
    st.lists(_WORD, min_size=1, max_size=18),
    st.lists(st.sampled_from(["", "", "", ",", "."]), min_size=18, max_size=18),
)


def _voice(text: str, rate: float, factors: tuple[float, float, float]) -> tuple[list[float], float]:
    """Real start of each unit and the audio length, for a voice at ``rate``.

    ``factors`` is ``(share, early, late)``: the units before ``share`` of the
    text run ``early`` times the model's duration, the rest ``late`` times
    (speeding up or slowing down along a sentence is what moves a word
    furthest from where the model puts it).
    """
    units = split_units(text)
    spans = layout_units(units, rate)
    share, early, late = factors
    starts, t = [], 0.0
    for i, (unit, (start, end)) in enumerate(zip(units, spans, strict=True)):
        factor = early if i < share * len(units) else late
        starts.append(t)
        t += ((end - start) + unit.pause_after) * factor
    return starts, t


def _started(starts: list[float], played: float) -> int:
    return sum(1 for s in starts if s <= played + 1e-9)


@settings(max_examples=300, deadline=None)
@given(text=_SENTENCE, rate=st.floats(8.0, 22.0), factors=_factors(0.06), at=st.floats(0.0, 1.0))
# Long words spoken slowly, then short ones quickly: the short word after the
# interruption point is where the model is furthest ahead of the voice.
@example(text=_MIXED, rate=DEFAULT_CHARS_PER_SEC, factors=(0.5, 1.06, 0.94), at=0.893)
def test_with_the_audio_length_known_no_unstarted_word_is_kept(text, rate, factors, at):
    starts, length = _voice(text, rate, factors)
    played = at * length
    heard = estimate_heard_prefix(text, played_secs=played, audio_secs=length)
    assert heard.units_heard <= _started(starts, played)


@settings(max_examples=300, deadline=None)
@given(text=_SENTENCE, slower=st.floats(1 / 1.5, 1.3), factors=_factors(0.1), at=st.floats(0.0, 1.0))
@example(text=_MIXED, slower=1.3, factors=(0.5, 1.1, 0.9), at=0.7)
def test_while_synthesis_streams_no_unstarted_word_is_kept(text, slower, factors, at):
    starts, length = _voice(text, DEFAULT_CHARS_PER_SEC / slower, factors)
    played = at * length
    heard = estimate_heard_prefix(text, played_secs=played, streaming=True, chars_per_sec=DEFAULT_CHARS_PER_SEC)
    assert heard.units_heard <= _started(starts, played)
    spoken = [u for u in split_units(text) if u.spoken]
    assert heard.units_heard < len(split_units(text)) or not spoken, "the last word's audio did not exist yet"


@settings(max_examples=200, deadline=None)
@given(sentences=st.lists(_SENTENCE, min_size=1, max_size=4), rate=st.floats(11.0, 17.0),
       factors=_factors(0.06), at=st.floats(0.0, 1.0),
       synthesized_share=st.floats(0.0, 1.0))
def test_the_tracker_keeps_no_unstarted_word_of_a_reply_still_being_synthesized(sentences, rate, factors, at,
                                                                                  synthesized_share):
    """Across sentences: complete ones have their length, the one being synthesized does not."""
    tracker = PlaybackTracker()
    voiced = [_voice(s, rate, factors) for s in sentences]
    total = sum(length for _, length in voiced)
    played = at * total
    synthesized = played + synthesized_share * (total - played)
    reply = ReplyPlayback(reply_id=1, state="interrupted", written_secs=played)
    offset, truth = 0.0, 0
    for index, (sentence, (starts, length)) in enumerate(zip(sentences, voiced, strict=True)):
        if offset > played:
            break  # its announcement is released only after the previous sentence's audio
        reply.segments.append(SpokenSegment(sentence, index + 1, offset, played_through=offset + length <= played))
        tracker.observer.note_synthesized(index + 1, max(0.0, min(offset + length, synthesized) - offset))
        if synthesized >= offset + length:
            tracker.observer.note_complete(index + 1)
        truth += _started([offset + s for s in starts], played)
        offset += length
    heard = tracker.heard_prefix(reply)
    assert len(heard.text.split()) <= truth
