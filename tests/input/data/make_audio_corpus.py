"""Write ``audio_corpus.jsonl``: caller utterances for the audio benchmark (``bench_input.py --audio``).

Each line is ``{"id", "parts", "pause", "label", "shape", "domain", "rate"}``:
``parts`` are what the caller says, ``pause`` the silence between them (split
identifiers: 0.8-2.0 s, inside the identifier), ``label`` is ``split`` (one
identifier across the pause: it must reach the model in one user message),
``complete`` (an identifier said whole) or ``ordinary`` (no identifier), and
``rate`` the speaking-rate multiplier. Labels come from how each line is
built, never from the rules. Regenerate with ``python tests/input/data/make_audio_corpus.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).with_name("audio_corpus.jsonl")
rng = random.Random(20261201)
DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
RATES = [0.85, 1.0, 1.2]
FIRST = ["mia", "omar", "sofia", "raj", "lena", "yusuf", "chen", "ava"]
LAST = ["li", "garcia", "patel", "kovacs", "nguyen", "rossi", "santos", "khan"]
LETTERS = "BCDFGHKMNPRSTVXYZ"


def digits(n: int) -> list[str]:
    return [rng.choice(DIGITS[1:])] + [rng.choice(DIGITS) for _ in range(n - 1)]


def spell(word: str) -> str:
    return " ".join(word.upper())


def split_at(words: list[str], low: int, high: int) -> tuple[str, str]:
    cut = rng.randint(low, high)
    return " ".join(words[:cut]), " ".join(words[cut:])


def order_id() -> tuple[str, list[str]]:
    return "My order number is", ["W", *digits(7)]


def zip_code() -> tuple[str, list[str]]:
    return "The zip code is", digits(5)


def item_id() -> tuple[str, list[str]]:
    return "The item number is", digits(10)


def phone() -> tuple[str, list[str]]:
    return "My phone number is", digits(10)


def reservation() -> tuple[str, list[str]]:
    code = [rng.choice(LETTERS) for _ in range(3)] + [rng.choice(DIGITS[1:]), rng.choice(LETTERS),
                                                     rng.choice(DIGITS[1:])]
    return "My confirmation code is", code


def email() -> tuple[str, list[str]]:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return "My email is", [first, "dot", last, "at", "gmail", "dot", "com"]


def user_id() -> tuple[str, list[str]]:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return "My user ID is", [first, "underscore", last, "underscore", *digits(4)]


def spelled_name() -> tuple[str, list[str]]:
    return "My last name is spelled", list(rng.choice([n for n in LAST if len(n) >= 5]).upper())


SHAPES = {
    "order_id": (order_id, "retail", 2, 5),
    "zip_code": (zip_code, "retail", 2, 3),
    "item_id": (item_id, "retail", 3, 7),
    "phone_number": (phone, "telecom", 3, 6),
    "reservation_code": (reservation, "airline", 2, 4),
    "email": (email, "retail", 3, 4),
    "user_id": (user_id, "retail", 2, 4),
    "spelled_name": (spelled_name, "retail", 2, 3),  # names of five letters or more
}
ORDINARY = [
    "I want to return the headphones I bought last week.",
    "Can you tell me when my package will arrive?",
    "I'd like to change the shipping address on my order.",
    "Yes, that's right, please go ahead.",
    "No, I think that's everything for today.",
    "The lamp arrived broken and I need a refund.",
    "I was charged twice for the same order.",
    "Could you cancel the subscription please?",
    "I have two items and one of them is the wrong size.",
    "My flight was delayed and I missed the connection.",
    "I'd like to move my booking to Friday morning.",
    "Is there a fee for changing the seat?",
]


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for shape, (make, domain, low, high) in SHAPES.items():
        for n in range(8):  # split across a pause inside the identifier
            lead, words = make()
            first, second = split_at(words, low, high)
            out.append({"id": f"split-{shape}-{n}", "parts": [f"{lead} {first}", second],
                        "pause": round(rng.uniform(0.8, 2.0), 2), "label": "split", "shape": shape,
                        "domain": domain, "rate": RATES[n % 3]})
        for n in range(4):  # said whole
            lead, words = make()
            # A spelled name is complete once the spelling stops and other words follow.
            tail = ", that's it." if shape == "spelled_name" else "."
            out.append({"id": f"complete-{shape}-{n}", "parts": [f"{lead} {' '.join(words)}{tail}"], "pause": 0.0,
                        "label": "complete", "shape": shape, "domain": domain, "rate": RATES[(n + 1) % 3]})
    for n, sentence in enumerate(ORDINARY * 2):
        out.append({"id": f"ordinary-{n}", "parts": [sentence], "pause": 0.0, "label": "ordinary",
                    "shape": "ordinary", "domain": "retail", "rate": RATES[n % 3]})
    return out


if __name__ == "__main__":
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows()), encoding="utf-8")
    print(f"wrote {OUT}")
