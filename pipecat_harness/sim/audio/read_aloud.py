"""How a caller reads a line of the script aloud: a long string of digits in groups, as phone numbers are read.

Nobody reads ten digits as one run, and Piper reads words exactly as written, so a run of ten or more digit words is
grouped in threes (the last taking a leftover digit: 3-3-4) with commas. Piper voices a comma as 0.3-0.4 s of silence:
longer than Silero's 0.2 s stop, so VAD hears separate stretches as it would a real caller's, and shorter than the
0.6 s speech timeout. Shorter runs (zip codes) are read as written.
"""

from __future__ import annotations

import re

from pipecat_harness.spoken import DIGIT_WORDS

__all__ = ["GROUPED_RUN_DIGITS", "read_aloud"]

#: A run of at least this many digit words is read in groups.
GROUPED_RUN_DIGITS = 10
_DIGIT = "|".join(sorted(DIGIT_WORDS, key=len, reverse=True))
_RUN = re.compile(rf"\b(?:{_DIGIT})(?:\s+(?:{_DIGIT}))+\b", re.IGNORECASE)


def _grouped(match: re.Match[str]) -> str:
    words = match.group(0).split()
    if len(words) < GROUPED_RUN_DIGITS:
        return match.group(0)
    groups = [words[i : i + 3] for i in range(0, len(words), 3)]
    if len(groups[-1]) == 1:
        groups[-2:] = [groups[-2] + groups[-1]]
    return ", ".join(" ".join(group) for group in groups)


def read_aloud(text: str) -> str:
    """One ``say`` of the script as Piper is given it, e.g. ``"four one five, five five five, zero one three four"``."""
    return _RUN.sub(_grouped, text)
