"""Estimate which prefix of a reply the caller heard, from how much of its audio played.

Without word timestamps, a speech-duration model (per letter, per word, pauses) maps played seconds onto the
text, scaled to the real audio length when known. A word counts as heard once a ``bias`` share played, above
one half since a word history keeps but the caller never heard misleads the model; a drift margin grows with
the distance from the nearest known time. Unspaced scripts are cut per character.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_BIAS", "DEFAULT_CHARS_PER_SEC", "HeardMethod", "HeardPrefix", "TextUnit", "estimate_heard_prefix",
           "layout_units", "split_units"]

HeardMethod = Literal["word_timestamps", "audio_length", "speaking_rate", "complete", "none"]

#: Share of a word's audio that must have played for it to count as heard.
DEFAULT_BIAS = 0.7
#: Letters per second of a typical TTS voice (about 165 words per minute).
DEFAULT_CHARS_PER_SEC = 13.75

# Relative durations of the speech model, in seconds at DEFAULT_CHARS_PER_SEC.
_WORD_OVERHEAD_SECS = 0.06
_MIN_WORD_SECS = 0.1
_PAUSES = {**dict.fromkeys(".?!。？！", 0.4), **dict.fromkeys(",，、", 0.18), ";": 0.22, ":": 0.22, "—": 0.2}
# How far a word's real start may lie after the modelled one, as a share of its distance from the nearest
# anchor, with the audio length known and without it: the smallest values that kept no unstarted word on
# scripts/bench_history.py's voice (off the model by up to 40% per word, 120-210 words per minute).
_ANCHORED_DRIFT = 0.15
_UNANCHORED_DRIFT = 0.45
# Played audio beyond the text's modelled length by this factor: the text was still streaming.
_OVERRUN_FACTOR = 1.6

_UNSPACED_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "HANGUL SYLLABLE")
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class HeardPrefix:
    """The part of a reply the caller is estimated to have heard, cut at a word boundary.

    ``method`` is ``word_timestamps``, ``audio_length`` (model scaled to the audio), ``speaking_rate``, ``complete``
    or ``none``; when not ``reliable`` (``reason`` says why), treat the reply as unheard. Units are words, or
    characters in unspaced scripts.
    """

    text: str
    method: HeardMethod
    confidence: float
    reliable: bool = True
    reason: str = ""
    units_heard: int = 0
    units_total: int = 0

    @property
    def complete(self) -> bool:
        """Whether the whole text was heard."""
        return self.reliable and self.units_total > 0 and self.units_heard >= self.units_total


@dataclass(frozen=True)
class TextUnit:
    """One word (or unspaced-script character) of a text, with its span and spoken weight."""

    start: int
    end: int
    text: str
    spoken: bool
    pause_after: float


@functools.lru_cache(maxsize=4096)
def _is_unspaced(char: str) -> bool:
    return not char.isascii() and unicodedata.name(char, "").startswith(_UNSPACED_SCRIPTS)


def split_units(text: str) -> list[TextUnit]:
    """Split ``text`` into spoken units: whitespace words, or characters in unspaced scripts.

    Punctuation and emoji fold into the neighbouring unit; a token with no letter or digit is an unspoken unit.
    """
    units: list[TextUnit] = []
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        if not match.group().isascii() and any(_is_unspaced(c) for c in match.group()):
            # Each unspaced character is a unit; punctuation attaches to the one before.
            for position in range(start + 1, end):
                if text[position].isalnum() and any(c.isalnum() for c in text[start:position]):
                    units.append(_unit(text, start, position))
                    start = position
        units.append(_unit(text, start, end))
    return units


def _unit(text: str, start: int, end: int) -> TextUnit:
    piece = text[start:end]
    last = next((c for c in reversed(piece) if c in _PAUSES or c.isalnum()), "")
    return TextUnit(start, end, piece, spoken=any(c.isalnum() for c in piece), pause_after=_PAUSES.get(last, 0.0))


def layout_units(units: Sequence[TextUnit], chars_per_sec: float = DEFAULT_CHARS_PER_SEC) -> list[tuple[float, float]]:
    """Lay units out in time with the duration model: ``(start, end)`` seconds for each."""
    spans = []
    t = 0.0
    for unit in units:
        letters = sum(1 for c in unit.text if c.isalnum())
        if any(_is_unspaced(c) for c in unit.text):
            letters *= 3  # a character of these scripts is a syllable, not a letter
        duration = max(_MIN_WORD_SECS, letters / chars_per_sec + _WORD_OVERHEAD_SECS) if unit.spoken else 0.0
        spans.append((t, t + duration))
        t += duration + unit.pause_after
    return spans


def _unreliable(reason: str, total: int) -> HeardPrefix:
    return HeardPrefix(text="", method="none", confidence=0.0, reliable=False, reason=reason, units_total=total)


def _complete(text: str, total: int) -> HeardPrefix:
    return HeardPrefix(text=text.strip(), method="complete", confidence=1.0, units_heard=total, units_total=total)


def _cut(text: str, units: Sequence[TextUnit], heard: int) -> str:
    return text[: units[heard - 1].end].strip() if heard > 0 else ""


def _count_heard(spans: Sequence[tuple[float, float]], played: float, bias: float, *, drift: float = 0.0,
                 length: float | None = None) -> int:
    """Leading spans heard by ``played``: ``bias`` of each played, past the drift margin from the nearest anchor."""
    heard = 0
    for start, end in spans:
        distance = start if length is None else min(start, length - start)
        if start + bias * (end - start) + drift * max(0.0, distance) > played + 1e-9:
            break
        heard += 1
    return heard


def _normal(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalnum())


def _spans_from_word_times(units: Sequence[TextUnit], word_times: Sequence[tuple[str, float]],
                           chars_per_sec: float) -> list[tuple[float, float]] | None:
    """Align timed words to the text's units; return a span per timed unit, or None when they do not align."""
    spoken = [i for i, u in enumerate(units) if u.spoken]
    timed = [(w, t) for w, t in word_times if _normal(w)]
    if not timed or len(timed) > len(spoken):
        return None
    agreeing = sum(1 for (w, _), i in zip(timed, spoken, strict=False) if _normal(w) == _normal(units[i].text))
    if agreeing < len(timed) / 2:
        return None
    modelled = layout_units(units, chars_per_sec)
    starts = {spoken[k]: t for k, (_, t) in enumerate(timed)}
    last_timed = spoken[len(timed) - 1]
    spans: list[tuple[float, float]] = []
    for i in range(last_timed + 1):
        if i not in starts:
            previous = spans[-1][1] if spans else 0.0
            spans.append((previous, previous))
            continue
        start = starts[i]
        length = modelled[i][1] - modelled[i][0]
        next_start = next((starts[j] for j in range(i + 1, last_timed + 1) if j in starts), None)
        # A word ends at the next word's start minus the pause after it, never later than the model says.
        end = start + length if next_start is None else min(
            next_start, start + max(length, next_start - start - units[i].pause_after))
        spans.append((start, max(start, end)))
    return spans


def estimate_heard_prefix(text: str, *, played_secs: float, audio_secs: float | None = None,
                          word_times: Sequence[tuple[str, float]] | None = None, bias: float = DEFAULT_BIAS,
                          chars_per_sec: float | None = None, streaming: bool = False) -> HeardPrefix:
    """Estimate the prefix of ``text`` the caller heard after ``played_secs`` of its audio (from its start).

    The duration model is scaled to ``audio_secs``, the complete audio's length when known, else runs at
    ``chars_per_sec``; ``word_times`` are ``(word, start_secs)`` of the words in order (words not listed had not
    started); ``bias`` is the share of a word that must have played (higher keeps less); ``streaming``: the synthesis
    had not ended, so ``audio_secs`` is ignored and the last word is never heard. The prefix is not ``reliable``
    when no audio played, the text has no words, or more audio played than the text accounts for. ``ValueError``:
    ``bias`` outside ``[0, 1]`` or a negative duration.
    """
    if not 0.0 <= bias <= 1.0:
        raise ValueError(f"bias must be between 0 and 1, got {bias}")
    if played_secs < 0 or (audio_secs is not None and audio_secs < 0):
        raise ValueError("played_secs and audio_secs must not be negative")
    if streaming:
        audio_secs = None
    units = split_units(text or "")
    total = len(units)
    if not any(u.spoken for u in units):
        return _unreliable("no words in the text", total)
    if played_secs <= 0:
        return _unreliable("no audio played", total)
    rate = chars_per_sec or DEFAULT_CHARS_PER_SEC

    if word_times:
        spans = _spans_from_word_times(units, word_times, rate)
        if spans is not None:
            heard = _count_heard(spans, played_secs, bias)
            if len(spans) == total and heard == total:
                return _complete(text, total)
            return HeardPrefix(_cut(text, units, heard), "word_timestamps", 0.95, units_heard=heard, units_total=total)

    if audio_secs is not None and audio_secs > 0 and played_secs >= audio_secs - 1e-6:
        return _complete(text, total)

    spans = layout_units(units, rate)
    modelled_total = spans[-1][1] + units[-1].pause_after
    method: HeardMethod
    if audio_secs is not None and audio_secs > 0 and modelled_total > 0:
        scale = audio_secs / modelled_total
        spans = [(s * scale, e * scale) for s, e in spans]
        method, confidence = "audio_length", 0.85
        heard = _count_heard(spans, played_secs, bias, drift=_ANCHORED_DRIFT, length=audio_secs)
    elif played_secs > modelled_total * _OVERRUN_FACTOR + 0.5:
        return _unreliable("more audio played than the text accounts for (text still streaming)", total)
    else:
        method, confidence = "speaking_rate", 0.6
        heard = _count_heard(spans, played_secs, bias, drift=_UNANCHORED_DRIFT)
    if streaming:  # the last word's audio did not exist yet
        heard = min(heard, max(i for i, u in enumerate(units) if u.spoken))
    return HeardPrefix(_cut(text, units, heard), method, confidence, units_heard=heard, units_total=total)
