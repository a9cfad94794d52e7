"""How recognisers write what the caller said: formatting profiles for the simulated STT.

* ``deepgram`` (``smart_format``): spoken digits become one numeral ("two three seven" -> ``237``), ten digits a phone
  number (``415-555-0134``); sentences get capitals and end punctuation;
* ``whisper`` (as faster-whisper tiny.en wrote the project's audio corpus): every segment ends in a period; spoken
  letters and digits are hyphenated (``W-237``, ``C-F-A-0-4-Y``), two digits read as a decimal (``9.4``), a phone
  number keeps its dashes;
* ``plain`` returns the text unchanged.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Literal

from pipecat_harness.spoken import DIGIT_WORDS

__all__ = ["ASR_PROFILES", "AsrProfile", "format_transcript"]

AsrProfile = Literal["plain", "deepgram", "whisper"]
ASR_PROFILES: tuple[str, ...] = ("plain", "deepgram", "whisper")

_EDGE_PUNCT = re.compile(r"^([\"'(]*)(.*?)([.,!?;:\"')]*)$")
_UNAMBIGUOUS_DIGITS = {w: d for w, d in DIGIT_WORDS.items() if w not in ("o", "oh")}


def format_transcript(text: str, profile: AsrProfile | str, *, closes_segment: bool = True,
                      opens_segment: bool = True) -> str:
    """Write ``text`` as a recogniser of ``profile`` would (a capital opens a segment, end punctuation closes it)."""
    if profile == "plain":
        return text
    if profile not in ASR_PROFILES:
        raise ValueError(f"unknown ASR profile {profile!r}; choose one of {', '.join(ASR_PROFILES)}")
    tokens = _group(text.split(), hyphenate=profile == "whisper")
    if not tokens:
        return text
    out = " ".join(tokens)
    if opens_segment:
        out = out[0].upper() + out[1:]
    if closes_segment and out[-1] not in ".?!":
        out += "."
    elif not closes_segment:
        out = out.rstrip(".")
    return out


def _group(words: list[str], *, hyphenate: bool) -> list[str]:
    """Join runs of spoken digits (and, for Whisper, single letters) into the recogniser's written forms."""
    out: list[str] = []
    run: list[tuple[str, str]] = []  # (kind, written) of the current identifier run

    def flush() -> None:
        if run:
            out.append(_write_run(run, hyphenate=hyphenate))
            run.clear()

    for raw in words:
        lead, core, trail = _EDGE_PUNCT.match(raw).groups()  # type: ignore[union-attr]  # always matches
        lower = core.lower()
        kind = ""
        if lower in _UNAMBIGUOUS_DIGITS:
            kind, written = "digit", _UNAMBIGUOUS_DIGITS[lower]
        elif lower in ("o", "oh") and run and run[-1][0] == "digit":
            kind, written = "digit", "0"
        elif len(core) == 1 and core.isalpha() and core.isascii() and (core.isupper() or run):
            kind, written = "letter", core.upper()
        if kind and not lead:
            run.append((kind, written))
            if trail:
                flush()
                out[-1] += trail
            continue
        flush()
        out.append(raw)
    flush()
    return out


def _write_run(run: list[tuple[str, str]], *, hyphenate: bool) -> str:
    digits = "".join(w for k, w in run if k == "digit")
    letters = [w for k, w in run if k == "letter"]
    if not letters:
        if len(digits) == 10:
            return f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"
        if hyphenate and len(digits) == 2:
            return f"{digits[0]}.{digits[1]}"
        return digits
    if not hyphenate:
        # Deepgram keeps spoken letters apart and writes the digits between them as numerals.
        groups = itertools.groupby(run, key=operator.itemgetter(0))
        return " ".join(("" if kind == "digit" else " ").join(w for _, w in group) for kind, group in groups)
    if len(letters) == 1 and run[0][0] == "letter":
        return f"{letters[0]}-{digits}" if digits else letters[0]
    return "-".join(w for _, w in run)
