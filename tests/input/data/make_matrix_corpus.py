"""Write ``matrix_dev.jsonl`` and ``matrix_test.jsonl``: caller utterances for the speech matrix.

Both splits are drawn once, from one seeded generator, and written together; the
test split is never used to tune a rule or a wait. They differ in everything a
rule could overfit to:

* phrasing: each split has its own templates (lead-ins, how groups, repeats,
  corrections and "as in" are said);
* identifiers: drawn from disjoint pools (names, mail providers, letters, and
  no identifier string of one split occurs in the other);
* voices: dev is read by Piper at its own pace and espeak-ng ``en-us``; test by
  Piper at 0.9x/1.15x and espeak-ng ``en-us+m3``/``en-us+f2`` (other formant sets).

Each line is ``{"id", "split", "parts", "pause", "label", "shape", "domain",
"question", "expected", "rate", "espeak_variant"}``: ``parts`` what the caller
says, ``pause`` the silence between them (0.8-2.0 s, inside the identifier for a
``split`` row), ``question`` the agent's question being answered, ``expected``
the identifier in written form. Labels come from how a line is built, never
from the rules. Regenerate with ``python tests/input/data/make_matrix_corpus.py``
(the output is a pure function of the seed).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

SEED = 20261202
#: The test split's own stream: drawn after dev, from a seed nobody tuned with.
TEST_SEED = 90210917
HERE = Path(__file__).parent
rng = random.Random(SEED)
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
NATO = {"B": "bravo", "C": "charlie", "D": "delta", "F": "foxtrot", "G": "golf", "H": "hotel", "K": "kilo",
        "L": "lima", "M": "mike", "N": "november", "P": "papa", "R": "romeo", "S": "sierra", "T": "tango",
        "V": "victor", "X": "x-ray", "Z": "zulu"}
AS_IN = {"B": "boy", "C": "cat", "D": "dog", "F": "frank", "G": "george", "H": "henry", "K": "king", "L": "larry",
         "M": "mary", "N": "nancy", "P": "peter", "R": "robert", "S": "sam", "T": "tom", "V": "victor",
         "X": "x-ray", "Z": "zebra"}
POOLS = {
    "dev": {"names": ["santos", "kovacs", "nguyen", "rossi", "patel", "garcia", "okafor", "lindqvist"],
            "first": ["mia", "omar", "lena", "raj"], "mail": ["gmail", "outlook"], "letters": "BCDFGHKLM"},
    "test": {"names": ["moreau", "tanaka", "brennan", "haddad", "schulz", "ferreira", "walsh", "novak"],
             "first": ["ines", "theo", "dara", "kofi"], "mail": ["yahoo", "icloud"], "letters": "NPRSTVXZ"},
}
QUESTIONS = {
    "order_id": "Could you tell me your order number?",
    "zip_code": "And what's the zip code on the account?",
    "phone_number": "What's the phone number on the account?",
    "reservation_code": "Can I have your confirmation code?",
    "last_name": "Could you spell your last name for me?",
    "email": "What's the email address on the account?",
}
DOMAIN = {"order_id": "retail", "zip_code": "retail", "last_name": "retail", "email": "retail",
          "phone_number": "telecom", "reservation_code": "airline"}
LEAD = {
    "dev": {"order_id": ["My order number is", "It's", "Sure, it's"], "zip_code": ["The zip code is", "It's"],
            "phone_number": ["My number is", "It's"], "reservation_code": ["The code is", "It's"],
            "last_name": ["It's {name},", "Sure, {name},"], "email": ["It's", "My email is"]},
    "test": {"order_id": ["Yeah, the order is", "Okay so it's", "Let me see, it's"],
             "zip_code": ["Zip is", "That'd be"], "phone_number": ["You can reach me at", "Yeah it's"],
             "reservation_code": ["Confirmation is", "I've got it here, it's"],
             "last_name": ["Yes, {name}, that's", "{name}, spelled"], "email": ["Sure, it's", "You can use"]},
}


def digits(n: int) -> list[str]:
    return [rng.choice("123456789")] + [rng.choice("0123456789") for _ in range(n - 1)]


def say_digit(d: str, split: str) -> str:
    if d == "0" and rng.random() < (0.5 if split == "dev" else 0.7):
        return "oh"
    return WORDS[int(d)]


def say_digits(ds: list[str], split: str, groups: list[int] | None = None) -> list[str]:
    """Spoken tokens; repeats as "double", groups separated by a comma token."""
    out: list[str] = []
    index = 0
    sizes = groups or [len(ds)]
    for g, size in enumerate(sizes):
        chunk = ds[index:index + size]
        index += size
        i = 0
        while i < len(chunk):
            if i + 1 < len(chunk) and chunk[i] == chunk[i + 1] and rng.random() < 0.8:
                out.append(f"double {say_digit(chunk[i], split)}")
                i += 2
            else:
                out.append(say_digit(chunk[i], split))
                i += 1
        if g < len(sizes) - 1:
            out[-1] += ","
    return out


def order_id(split: str, pool: dict) -> tuple[str, list[str]]:
    ds = digits(7)
    if rng.random() < 0.4:
        ds[2] = ds[3]  # a repeat to say as "double"
    groups = rng.choice([[3, 4], [2, 2, 3], None]) if split == "dev" else rng.choice([[4, 3], [3, 2, 2], None])
    return "W" + "".join(ds), ["W,", *say_digits(ds, split, groups)]


def zip_code(split: str, pool: dict) -> tuple[str, list[str]]:
    ds = digits(5)
    return "".join(ds), say_digits(ds, split)


def phone_number(split: str, pool: dict) -> tuple[str, list[str]]:
    ds = digits(10)
    if rng.random() < 0.5:
        ds[8] = ds[7]
    return "".join(ds), say_digits(ds, split, [3, 3, 4])


def reservation_code(split: str, pool: dict) -> tuple[str, list[str]]:
    letters = pool["letters"]
    code = [rng.choice(letters), rng.choice(letters), rng.choice("23456789"), rng.choice(letters),
            rng.choice(letters), rng.choice("23456789")]
    spoken = []
    for c in code:
        if c.isdigit():
            spoken.append(WORDS[int(c)])
        elif split == "dev" and rng.random() < 0.3:
            spoken.append(f"{c} as in {AS_IN[c]}")
        elif split == "test" and rng.random() < 0.4:
            spoken.append(NATO[c] if rng.random() < 0.5 else f"{c} as in {AS_IN[c]},")
        else:
            spoken.append(c)
    return "".join(code), spoken


def last_name(split: str, pool: dict) -> tuple[str, list[str]]:
    name = rng.choice(pool["names"])
    return name.upper(), list(name.upper())


def email(split: str, pool: dict) -> tuple[str, list[str]]:
    first, last = rng.choice(pool["first"]), rng.choice(pool["names"])
    mail = rng.choice(pool["mail"])
    return f"{first}.{last}@{mail}.com".upper(), [first, "dot", last, "at", mail, "dot", "com"]


SHAPES: dict[str, Callable[[str, dict], tuple[str, list[str]]]] = {
    "order_id": order_id, "zip_code": zip_code, "phone_number": phone_number,
    "reservation_code": reservation_code, "last_name": last_name, "email": email,
}
#: Where a split may fall (token index range inside the identifier's spoken tokens).
CUTS = {"order_id": (2, 5), "zip_code": (2, 3), "phone_number": (3, 6), "reservation_code": (2, 4),
        "last_name": (2, 4), "email": (2, 4)}


def correction(spoken: list[str], split: str) -> list[str]:
    """The caller misreads the first digits and corrects them ("no, sorry, ...")."""
    head = spoken[:2]
    last = head[-1].rstrip(",").split()[-1]
    wrong = [f"{WORDS[(WORDS.index(last) + 1) % 10] if last in WORDS else 'five'},"]
    said = "no, sorry," if split == "dev" else rng.choice(["sorry, I mean", "wait, no,"])
    return head[:1] + wrong + [said] + spoken[1:]


def row(split: str, index: int, shape: str, label: str, used: set[str]) -> dict:
    pool = POOLS[split]
    while True:
        expected, spoken = SHAPES[shape](split, pool)
        if expected not in used:
            used.add(expected)
            break
    if shape in ("order_id", "phone_number") and rng.random() < 0.25:
        spoken = correction(spoken, split)
    lead = rng.choice(LEAD[split][shape]).format(name=expected.capitalize())
    pause = round(rng.uniform(0.8, 2.0), 2)
    if label == "split":
        low, high = CUTS[shape]
        cut = rng.randint(low, min(high, len(spoken) - 1))
        parts = [f"{lead} {' '.join(spoken[:cut])}".strip(" ,"), " ".join(spoken[cut:]).strip(" ,")]
    else:
        parts = [f"{lead} {' '.join(spoken)}".strip(" ,")]
    rate = 1.0 if split == "dev" else rng.choice([0.9, 1.15])
    variant = "en-us" if split == "dev" else rng.choice(["en-us+m3", "en-us+f2"])
    return {"id": f"{split}-{label}-{shape}-{index}", "split": split, "parts": parts, "pause": pause,
            "label": label, "shape": shape, "domain": DOMAIN[shape], "question": QUESTIONS[shape],
            "expected": expected, "rate": rate, "espeak_variant": variant}


def build(split: str, used: set[str], splits_per_shape: int = 3, complete_per_shape: int = 2) -> list[dict]:
    rows = []
    for shape in SHAPES:
        rows += [row(split, i, shape, "split", used) for i in range(splits_per_shape)]
        rows += [row(split, i, shape, "complete", used) for i in range(complete_per_shape)]
    return rows


def main() -> None:
    used: set[str] = set()
    for split in ("dev", "test"):
        if split == "test":
            rng.seed(TEST_SEED)
        rows = build(split, used)
        path = HERE / f"matrix_{split}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"{path.name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
