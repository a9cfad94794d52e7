"""Tokens and spoken numbers: what an agent says, as words and numeric values.

Voice agents say prices and times as people do ("one forty-nine", "a hundred and twenty dollars", "nine thirty").
:func:`read_numbers` reads them as :class:`NumberToken` values that keep the spoken grouping (``one forty-nine`` is
``[1, 49]``), so a caller can read the same words as a price (149) or a time (1:49).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pipecat_harness.spoken import DIGIT_WORDS

__all__ = ["TENS_WORDS", "UNIT_WORDS", "NumberToken", "Token", "negated", "read_numbers", "split_sentences", "stem",
           "tokenize"]

#: Number words 0-19 and their values (from :data:`~pipecat_harness.spoken.DIGIT_WORDS`; a lone "o" is a letter here).
UNIT_WORDS = {word: int(digit) for word, digit in DIGIT_WORDS.items() if len(word) > 1} | {
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19}
#: Tens words and their values ("fourty" is a misspelling a model writes).
TENS_WORDS = {"twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
              "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1000}
_NUMBER_WORDS = set(UNIT_WORDS) | set(TENS_WORDS) | set(_SCALES)

_NEGATIONS = {"no", "not", "don't", "doesn't", "didn't", "can't", "cannot", "won't", "isn't", "aren't", "wasn't",
              "haven't", "hasn't", "never", "unable", "unfortunately", "nor", "without"}

_TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[a-z]+(?:'[a-z]+)?|[$€£%/:]")
_SENTENCE_RE = re.compile(r"(?<=[.?!;])\s+|\n+")


@dataclass(frozen=True)
class NumberToken:
    """A number read from digits or words.

    Parameters:
        value: The number as a price-style reading (``one forty-nine`` -> 149).
        groups: The spoken groups (``[1, 49]``; one group for a plain cardinal or digits).
        digits: Whether it was written with digits.
        minutes: Minutes when written as ``9:30`` (``None`` otherwise).
        text: The source text of the number.
    """

    value: float
    groups: tuple[int, ...] = ()
    digits: bool = False
    minutes: int | None = None
    text: str = ""


@dataclass
class Token:
    """One word, symbol or number in an utterance."""

    word: str
    number: NumberToken | None = None


def split_sentences(text: str) -> list[str]:
    """Split an utterance into sentences (decimal points and ``a.m.`` survive)."""
    return [s.strip() for s in _SENTENCE_RE.split(_normalise(text)) if s.strip()]


def _normalise(text: str) -> str:
    text = text.replace("’", "'").replace("–", "-").replace("—", " - ")
    text = re.sub(r"\b(Dr|Mr|Mrs|Ms|St)\.(?=\s)", r"\1", text)  # a title's point ends no sentence
    return re.sub(r"\b([ap])\.\s?m\.?(?=\s|$|[,;!?])", r"\1m", text, flags=re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Split text into lower-case words, digit runs and the symbols ``$ € £ % / :`` (``6pm`` is ``6 pm``)."""
    text = _normalise(text).lower()
    text = re.sub(r"(?<=\d)(?=[a-z])|(?<=[a-z])(?=\d)", " ", text).replace("24/7", " twentyfourseven ")
    return _TOKEN_RE.findall(text)


def read_numbers(words: list[str]) -> list[Token]:
    """Group the words :func:`tokenize` gives into tokens, reading number words and digits as :class:`NumberToken`."""
    tokens: list[Token] = []
    i = 0
    while i < len(words):
        word = words[i]
        parsed: tuple[NumberToken, int] | None = None
        if word[0].isdigit():
            parsed = _read_digits(words, i)
        elif word in _NUMBER_WORDS or (word == "a" and i + 1 < len(words) and words[i + 1] in _SCALES):
            parsed = _read_words(words, i)
        if parsed is None:
            tokens.append(Token(word))
            i += 1
        else:
            number, i = parsed
            tokens.append(Token(number.text, number))
    return tokens


def _read_digits(words: list[str], i: int) -> tuple[NumberToken, int]:
    text = words[i]
    if i + 2 < len(words) and words[i + 1] == ":" and words[i + 2].isdigit():
        hours, minutes = int(text), int(words[i + 2])
        return NumberToken(hours + minutes / 100, (hours, minutes), True, minutes, f"{text}:{words[i + 2]}"), i + 3
    # "1,250.50" groups thousands; in "4,5" the comma is a decimal point.
    value = float(text.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", text) else text.replace(",", "."))
    group = (int(value),) if value == int(value) else ()
    return NumberToken(value, group, True, None, text), i + 1


def _small(words: list[str], i: int) -> tuple[int, int] | None:
    """Read 0-99 from words (``forty nine``, ``twelve``); return (value, next index)."""
    if i >= len(words):
        return None
    word = words[i]
    if word in TENS_WORDS:
        value = TENS_WORDS[word]
        if i + 1 < len(words) and words[i + 1] in UNIT_WORDS and 0 < UNIT_WORDS[words[i + 1]] < 10:
            return value + UNIT_WORDS[words[i + 1]], i + 2
        return value, i + 1
    if word in UNIT_WORDS:
        return UNIT_WORDS[word], i + 1
    return None


def _read_words(words: list[str], start: int) -> tuple[NumberToken, int] | None:
    i = start
    total = 0
    used_scale = False
    if words[i] == "oh":
        return None
    if words[i] == "a":
        current, i = 1, i + 1
    else:
        first = _small(words, i)
        if first is None:
            return None
        current, i = first
    groups = [current]
    while i < len(words):
        word = words[i]
        if word in _SCALES:
            scale = _SCALES[word]
            current = max(current, 1) * scale
            if scale == 1000:
                total, current = total + current, 0
            used_scale = True
            groups = [total + current]
            i += 1
            continue
        if word == "and" and used_scale and _small(words, i + 1) is not None:
            i += 1
            continue
        nxt = _small(words, i)
        if nxt is None:
            break
        value, j = nxt
        if used_scale and current % 100 == 0 and value < 100:
            current += value
            groups = [total + current]
            i = j
            continue
        # "one forty-nine": a single group followed by a 10-99 group; "nine oh five".
        if not used_scale and len(groups) in (1, 2) and (10 <= value < 100 or words[i] == "oh"):
            if words[i] == "oh":
                follow = _small(words, j)
                if follow is None or follow[0] >= 10:
                    break
                value, j = follow
            groups.append(value)
            i = j
            continue
        break
    if len(groups) == 1:  # with a scale word the one group is the whole number
        value_f = float(groups[0])
    elif len(groups) == 2:
        value_f = float(groups[0] * 100 + groups[1]) if groups[0] < 100 else float(groups[0])
    else:
        value_f = groups[0] * 100 + groups[1] + groups[2] / 100
    return NumberToken(value_f, tuple(groups), False, None, " ".join(words[start:i])), i


def negated(words: list[str]) -> bool:
    """Whether a sentence contains a negation ("no", "not", "can't", "never"...)."""
    return any(w in _NEGATIONS or w.endswith("n't") for w in words)


@functools.lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A crude stem good enough to match "refunds", "refunded" and "refund" (and "basic's" to "basic")."""
    if word.endswith("'s"):
        word = word[:-2]
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and word[-1] == word[-2] and word[-1] not in "aeious":
                word = word[:-1]
            break
    return word.rstrip("e") if len(word) > 4 else word
