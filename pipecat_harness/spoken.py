"""Turn spoken identifiers into written ones, as a model reading a transcript would.

"W as in whiskey two three seven" becomes ``W237``. The scripted model fills tool arguments this way from what it
received, so a turn submitted mid-identifier produces a truncated lookup, as a real model would.
"""

from __future__ import annotations

import re

__all__ = ["CONNECTOR_WORDS", "DIGIT_HOMOPHONES", "DIGIT_WORDS", "LETTER_HOMOPHONES", "MULTIPLIER_WORDS", "NATO_WORDS",
           "spoken_to_identifier", "written_to_spoken"]

DIGIT_WORDS = {"zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
               "six": "6", "seven": "7", "eight": "8", "nine": "9"}
NATO_WORDS = {"alpha": "A", "alfa": "A", "bravo": "B", "charlie": "C", "delta": "D", "echo": "E", "foxtrot": "F",
              "golf": "G", "hotel": "H", "india": "I", "juliet": "J", "juliett": "J", "kilo": "K", "lima": "L",
              "mike": "M", "november": "N", "oscar": "O", "papa": "P", "quebec": "Q", "romeo": "R", "sierra": "S",
              "tango": "T", "uniform": "U", "victor": "V", "whiskey": "W", "whisky": "W", "xray": "X", "x-ray": "X",
              "yankee": "Y", "zulu": "Z"}
CONNECTOR_WORDS = {"dash": "-", "hyphen": "-", "minus": "-", "underscore": "_", "dot": ".", "period": ".", "point": ".",
                   "at": "@", "slash": "/", "hash": "#", "pound": "#"}
#: Words that repeat the next character ("double seven").
MULTIPLIER_WORDS = {"double": 2, "triple": 3}
_SPELLED_SYMBOLS = NATO_WORDS | CONNECTOR_WORDS


def spoken_to_identifier(text: str) -> str:
    """Collapse a spoken identifier (``"W as in whiskey two three"``) into its written form (``"W23"``).

    Digit words become digits, NATO words and "X as in Word" the letter, connector words their symbol, "double" and
    "triple" repeat the next character; anything else is kept, with spaces removed.
    """
    tokens = re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)?|\d+|[^\sA-Za-z\d]", text)
    out: list[str] = []
    repeat = 1
    i = 0
    while i < len(tokens):
        token = tokens[i]
        lower = token.lower()
        if lower in MULTIPLIER_WORDS:
            repeat = MULTIPLIER_WORDS[lower]
            i += 1
            continue
        if i + 2 < len(tokens) and tokens[i + 1].lower() == "as" and tokens[i + 2].lower() == "in":
            # "Y as in Yellow": the letter, then skip the example word.
            piece = token.upper() if len(token) == 1 else token
            i += 4 if i + 3 < len(tokens) else 3
        elif lower in DIGIT_WORDS and (len(token) > 1 or (lower == "o" and out and out[-1].isdigit())):
            piece = DIGIT_WORDS[lower]
            i += 1
        elif lower in _SPELLED_SYMBOLS:
            piece = _SPELLED_SYMBOLS[lower]
            i += 1
        elif token in {",", "?", "!"}:
            i += 1
            continue
        else:
            piece = token.upper() if len(token) == 1 and token.isalpha() else token
            i += 1
        out.append(piece * repeat)
        repeat = 1
    return "".join(out).rstrip(".")


_NUMERAL_WORDS = [next(w for w, d in DIGIT_WORDS.items() if d == str(n) and len(w) > 2) for n in range(10)]
_SYMBOL_WORDS = {"@": " at ", "_": " underscore ", "#": " pound "}
_PAUSE_PUNCT = re.compile(r"(?<=[\dA-Za-z])[.,](?=\s+(?:\d|[A-Za-z](?:[\s.,-]|$)|[A-Za-z]{1,3}\d|"
                          r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine)\b))", re.IGNORECASE)
_EDGES = re.compile(r"^([^\w]*)(.*?)([^\w]*)$")
_GROUPED = re.compile(r"[A-Za-z0-9]+(?:[-.][A-Za-z0-9]+)*")


def _is_written_id(word: str) -> bool:
    if not _GROUPED.fullmatch(word):
        return False
    if any(c.isdigit() for c in word):
        return True
    parts = re.split(r"[-.]", word)
    return len(parts) > 1 and all(len(p) == 1 for p in parts)  # "C-F-A", "R.O.S.S.I"


def written_to_spoken(text: str) -> str:
    """Read a recogniser's formatted transcript back into spoken words, as a model reading it would.

    ``It's W-4817. 420.`` becomes ``It's W four eight one seven four two zero.`` (the break inside the identifier gone).
    """
    out = _PAUSE_PUNCT.sub("", text)
    for symbol, word in _SYMBOL_WORDS.items():
        out = out.replace(symbol, word)
    out = re.sub(r"(?<=[A-Za-z])\.(?=[A-Za-z]{2})|(?<=[A-Za-z]{2})\.(?=[A-Za-z])", " dot ", out)
    words = []
    for raw in out.split():
        lead, core, trail = _EDGES.match(raw).groups()  # type: ignore[union-attr]  # always matches
        if _is_written_id(core):
            pieces = re.findall(r"\d|[A-Za-z]", core)
            core = " ".join(_NUMERAL_WORDS[int(p)] if p.isdigit() else p.upper() for p in pieces)
        words.append(f"{lead}{core}{trail}")
    return " ".join(words)


#: Words a recogniser writes for a digit it heard ("for" for 4, "to" for 2): digits only where a digit is expected.
DIGIT_HOMOPHONES = {"for": "4", "fore": "4", "to": "2", "too": "2", "won": "1", "ate": "8", "tree": "3", "free": "3"}
#: Words a recogniser writes for a spelled letter ("see" for C): letters only where a letter is expected.
LETTER_HOMOPHONES = {"see": "C", "sea": "C", "bee": "B", "be": "B", "you": "U", "why": "Y", "are": "R",
                     "our": "R", "oh": "O", "tea": "T", "jay": "J", "kay": "K", "queue": "Q", "eye": "I", "ex": "X",
                     "el": "L", "elle": "L", "em": "M", "en": "N", "es": "S", "dee": "D", "gee": "G", "pea": "P",
                     "vee": "V", "double-u": "W", "zed": "Z", "zee": "Z"}
