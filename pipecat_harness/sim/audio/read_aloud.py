"""How a caller reads a line of the script aloud: a long string of digits in groups, as phone numbers are read.

Nobody reads ten digits as one run: a caller says "four one five, five five five, zero one three four", with a short
breath between the groups. Piper reads the words exactly as written, so the simulated caller's line is grouped first.
The rule is the same for every script: a run of ten or more digit words is split into groups of three, the last group
taking a leftover single digit (3-3-4). The pauses are commas, which Piper voices as 0.3-0.4 s of silence: longer than
Silero's 0.2 s stop, so VAD hears the groups as separate stretches of speech, as it would a real caller's, and shorter
than the 0.6 s speech timeout. Shorter runs (zip codes, the digits after a pause) are read as written.
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
    groups = [words[i:i + 3] for i in range(0, len(words), 3)]
    if len(groups[-1]) == 1:
        groups[-2:] = [groups[-2] + groups[-1]]
    return ", ".join(" ".join(group) for group in groups)


def read_aloud(text: str) -> str:
    """``text`` as the caller voices it: digit runs of ten or more in groups of three (the last up to four).

    Args:
        text: One ``say`` of the caller's script.

    Returns:
        The text Piper is given, e.g. ``"four one five, five five five, zero one three four"``.
    """
    return _RUN.sub(_grouped, text)
