"""Split the tail of a transcript into identifier pieces and ordinary words.

Spoken and written forms map to the same pieces ("seven" and "7", "at" and "@", "whiskey" and "W"); the word
tables are shared with :mod:`pipecat_harness.spoken` and :mod:`pipecat_harness.numbers`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pipecat_harness.input.identifier_formats import EMAIL_FORMAT, IDENTIFIER_CUES
from pipecat_harness.numbers import TENS_WORDS, UNIT_WORDS
from pipecat_harness.spoken import CONNECTOR_WORDS, DIGIT_WORDS, MULTIPLIER_WORDS, NATO_WORDS

__all__ = ["FILLER_WORDS", "MULTIPLIER_WORDS", "Piece", "PieceKind", "tokenize"]

PieceKind = Literal["digit", "letter", "connector", "written", "multiplier", "word", "at"]

FILLER_WORDS = frozenset({"um", "uh", "uhm", "umm", "er", "erm", "hmm", "ah", "eh"})
#: Connector words that are ordinary words too often to count when they end a turn.
_WEAK_CONNECTORS = frozenset({"point", "period", "minus", "pound", "hash"})
_AMBIGUOUS_DIGITS = frozenset({"o", "oh"})
_AMBIGUOUS_LETTERS = frozenset({"a", "i"})

_SYMBOLS = frozenset({".", "-", "_", "/", "#"})
_CHUNK_EDGE = re.compile(r"^[\"'(\[{]+|[\"')\]},;:!?]+$")
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_QUANTITY_LIKE = re.compile(r"\$.*|.*%|[0-9]+(?:st|nd|rd|th|am|pm|s|k)|[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+\.[0-9]+",
                            re.ASCII)
_WRITTEN_ID = re.compile(r"#?[A-Za-z0-9]+(?:[._@/\-#][A-Za-z0-9]+)*[._@/\-#]?|#", re.ASCII)
_SPELLED_LETTERS = re.compile(r"[A-Za-z](?:[.\-][A-Za-z])+\.?", re.ASCII)
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
#: A recogniser's grouping of identifier pieces: "W-237-8156", "7-0-4-4-2-6", "C-F-A-0-4-Y", "W-237".
_GROUPED_PIECES = re.compile(r"(?:[A-Za-z]?[0-9]+|[A-Za-z])(?:[-.](?:[A-Za-z]?[0-9]+|[A-Za-z]))+", re.ASCII)
#: Digits a recogniser read as a number: "nine four" -> "9.4", "eight oh six six" -> "8,066".
_NUMBER_READING = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}|[0-9]{1,3}(?:,[0-9]{3})+", re.ASCII)
#: Words that announce spelling; an all-capitals word after one is the letters fused ("KOV", "CFA").
_SPELLING_CUES = frozenset({"spelled", "spell", "spelling", "letters", "initials", "code", "confirmation"})
_CONTEXT_PIECES = 6


@dataclass(slots=True)
class Piece:
    """One unit of the transcript tail.

    ``text`` is its written form ("7", "W", "@", "W23") or the lower-cased word, ``word`` the word as transcribed;
    ``as_number``: said as a number ("45"); ``weak``: a connector that is also a word ("point"); ``pause_after``:
    a comma followed it.
    """

    kind: PieceKind
    text: str
    word: str
    as_number: bool = False
    weak: bool = False
    pause_after: bool = False


def _word_pieces(word: str) -> list[Piece]:
    lower = word.lower()
    if lower in MULTIPLIER_WORDS:
        return [Piece("multiplier", str(MULTIPLIER_WORDS[lower]), word)]
    if lower in DIGIT_WORDS and lower not in _AMBIGUOUS_DIGITS:
        return [Piece("digit", DIGIT_WORDS[lower], word)]
    if UNIT_WORDS.get(lower, 0) >= 10 or lower in TENS_WORDS:  # "twelve", "forty"
        return [Piece("digit", str(UNIT_WORDS.get(lower) or TENS_WORDS[lower]), word, as_number=True)]
    if lower in NATO_WORDS:
        return [Piece("letter", NATO_WORDS[lower], word)]
    if lower == "at":
        return [Piece("at", "@", word)]
    if lower in CONNECTOR_WORDS:
        return [Piece("connector", CONNECTOR_WORDS[lower], word, weak=lower in _WEAK_CONNECTORS)]
    if len(lower) == 1 and lower.isascii() and lower.isalpha():
        return [Piece("letter", lower.upper(), word)]
    tens, _, unit = lower.partition("-")  # "twenty-three"
    if tens in TENS_WORDS and unit in DIGIT_WORDS:
        return [Piece("digit", str(TENS_WORDS[tens])[0] + DIGIT_WORDS[unit], word, as_number=True)]
    return [Piece("word", lower, word)]


def _chunk_pieces(chunk: str) -> list[Piece]:
    if chunk == "@":
        return [Piece("at", "@", chunk)]
    if chunk in _SYMBOLS:
        return [Piece("connector", chunk, chunk)]
    if _DIGITS.fullmatch(chunk):
        return [Piece("digit", chunk, chunk, as_number=len(chunk) > 1)]
    if _QUANTITY_LIKE.fullmatch(chunk):
        return [Piece("word", chunk.lower(), chunk)]
    if _SPELLED_LETTERS.fullmatch(chunk):
        letters = re.findall(r"[A-Za-z]", chunk)
        return [Piece("letter", letter.upper(), chunk) for letter in letters]
    if _WORD.fullmatch(chunk) or re.fullmatch(r"[A-Za-z]+(?:-[A-Za-z]+)+", chunk, re.ASCII):
        if "-" in chunk and chunk.lower() not in NATO_WORDS and not re.fullmatch(r"[a-z]+-[a-z]+", chunk.lower()):
            return [Piece("word", chunk.lower(), chunk)]
        return _word_pieces(chunk)
    if _GROUPED_PIECES.fullmatch(chunk):
        # The dashes and dots a recogniser puts between groups are not part of the identifier.
        return [Piece("written", re.sub(r"[-.]", "", chunk).upper(), chunk)]
    if _WRITTEN_ID.fullmatch(chunk):
        return [Piece("written", chunk.upper(), chunk)]
    return [Piece("word", chunk.lower(), chunk)]


def _resolve_ambiguous(pieces: list[Piece]) -> None:
    """Decide whether "oh"/"o" are digits and "a"/"I" are letters from their neighbours."""
    for index, piece in enumerate(pieces):
        lower = piece.word.lower()
        before = pieces[index - 1].kind if index > 0 else None
        after = pieces[index + 1].kind if index + 1 < len(pieces) else None
        if piece.kind == "word" and lower in _AMBIGUOUS_DIGITS:
            if before in ("digit", "written", "multiplier") or (after == "digit" and before != "word"):
                pieces[index] = Piece("digit", "0", piece.word)
        elif piece.kind == "letter" and lower in _AMBIGUOUS_LETTERS:
            announced = piece.word == "A" and index > 0 and pieces[index - 1].text in IDENTIFIER_CUES
            if not announced and not (before in ("letter", "digit", "written", "connector")
                                      or after in ("letter", "digit", "connector")):
                pieces[index] = Piece("word", lower, piece.word)


def _merge_tens(pieces: list[Piece]) -> list[Piece]:
    """Join "twenty" + "three" into one number piece."""
    merged: list[Piece] = []
    for piece in pieces:
        previous = merged[-1] if merged else Piece("word", "", "")
        tens = previous.kind == "digit" and previous.as_number and previous.word.lower() in TENS_WORDS
        if tens and piece.kind == "digit" and len(piece.text) == 1 and piece.word.lower() in DIGIT_WORDS:
            merged[-1] = Piece("digit", previous.text[0] + piece.text, f"{previous.word} {piece.word}", as_number=True)
        else:
            merged.append(piece)
    return merged


def _read_in_context(pieces: list[Piece]) -> list[Piece]:
    """Undo recogniser readings only context reveals: "under score", "9.4" after a cue, fused capitals ("KOV")."""
    out: list[Piece] = []
    for piece in pieces:
        previous = out[-1] if out else None
        window = {p.text for p in out[-_CONTEXT_PIECES:]}
        if piece.kind == "word" and piece.text == "score" and previous is not None and previous.text == "under":
            out[-1] = Piece("connector", "_", f"{previous.word} {piece.word}")
            continue
        if piece.kind == "word" and _NUMBER_READING.fullmatch(piece.word):
            after_pieces = previous is not None and previous.kind in ("digit", "written", "letter", "connector")
            if after_pieces or window & IDENTIFIER_CUES:
                out.append(Piece("digit", re.sub(r"[.,]", "", piece.word), piece.word, pause_after=piece.pause_after))
                continue
        word = piece.word
        short_word = piece.kind == "word" and word.isascii() and word.isalpha() and 2 <= len(word) <= 8
        if short_word and (word.isupper() or any(c.isupper() for c in word[1:])) and window & _SPELLING_CUES:
            out.extend(Piece("letter", letter, piece.word) for letter in piece.word)
            continue
        out.append(piece)
    return out


def tokenize(text: str, *, max_chars: int = 400) -> list[Piece]:
    """Return the pieces of the last ``max_chars`` characters of ``text`` (a word cut by the window is dropped)."""
    tail = text[-max_chars:]
    chunks = tail.split()
    if len(tail) < len(text) and chunks and not text[-max_chars - 1].isspace():
        chunks = chunks[1:]
    pieces: list[Piece] = []
    for raw in chunks:
        chunk = _CHUNK_EDGE.sub("", raw)
        sentence_period = chunk.endswith(".") and not chunk.endswith("..") and len(chunk) > 1
        if sentence_period and ("@" not in chunk or EMAIL_FORMAT.is_complete(chunk[:-1].upper())):
            chunk = chunk[:-1]  # not a spoken "dot"
        if not chunk:
            continue
        chunk_pieces = _chunk_pieces(chunk)
        if chunk_pieces and raw.endswith(","):
            chunk_pieces[-1].pause_after = True
        pieces.extend(chunk_pieces)
    _resolve_ambiguous(pieces)
    return _read_in_context(_merge_tens(pieces))
