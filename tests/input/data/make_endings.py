"""Write ``endings.jsonl``: labeled transcript endings for the ending rules.

Each line is ``{"text", "label", "domain", "shape"}`` where ``label`` is
``incomplete`` (the caller is mid-identifier: the turn must be held),
``complete`` (an identifier was said in full) or ``ordinary`` (no identifier
in progress). Labels come from how each ending was built, never from the rules
under test. Regenerate with ``python tests/input/data/make_endings.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).with_name("endings.jsonl")
rng = random.Random(20261130)

DIGIT = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
NATO = {
    "A": "alpha",
    "B": "bravo",
    "C": "charlie",
    "D": "delta",
    "E": "echo",
    "F": "foxtrot",
    "G": "golf",
    "H": "hotel",
    "K": "kilo",
    "L": "lima",
    "M": "mike",
    "N": "november",
    "P": "papa",
    "R": "romeo",
    "S": "sierra",
    "T": "tango",
    "V": "victor",
    "W": "whiskey",
    "X": "x-ray",
    "Y": "yankee",
    "Z": "zulu",
}
AS_IN = {
    "B": "boy",
    "D": "david",
    "M": "mary",
    "N": "nancy",
    "P": "peter",
    "S": "sam",
    "T": "tom",
    "Y": "yellow",
    "F": "frank",
    "V": "victor",
    "K": "king",
    "C": "charlie",
    "E": "edward",
}
FIRST = ["mia", "yusuf", "olivia", "raj", "lei", "anya", "omar", "sofia", "ethan", "noah", "amelia", "juan", "chen"]
LAST = ["li", "garcia", "patel", "kim", "rossi", "santos", "nguyen", "khan", "silva", "lopez", "brown", "ito"]
PROVIDERS = ["gmail", "yahoo", "outlook", "example", "hotmail", "icloud", "proton", "acme"]
TLDS = ["com", "org", "net", "io", "edu", "co dot uk"]
NAMES = ["SMITH", "KOVACS", "OKAFOR", "NGUYEN", "BAKER", "PATEL", "JONES", "WEBER", "MORALES"]
FILLERS = ["", "", "", "", " uh", " um", ","]

ZIP_LEADS = ["the zip code is", "zip is", "my zip code is", "postal code"]
ITEM_LEADS = ["the item id is", "product ID", "item number", "the product id is"]
CODE_LEADS = ["my confirmation code is", "the reservation is", "booking code", "reservation number"]
CLOSINGS = ["that is it", "that is all", "got it?", "that is the whole thing"]

rows: list[dict[str, str]] = []


def add(text: str, label: str, domain: str, shape: str) -> None:
    rows.append({"text": text.strip(), "label": label, "domain": domain, "shape": shape})


def digits(n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def say_digits(ds: str, style: str | None = None) -> str:
    style = style or rng.choice(["words", "words", "written_spaced", "written", "groups"])
    if style == "words":
        return " ".join(DIGIT[int(d)] for d in ds)
    if style == "written_spaced":
        return " ".join(ds)
    if style == "groups" and len(ds) > 3:
        cut = rng.randint(1, len(ds) - 1)
        return " ".join(DIGIT[int(d)] for d in ds[:cut]) + ", " + " ".join(DIGIT[int(d)] for d in ds[cut:])
    return ds


def filler() -> str:
    return rng.choice(FILLERS)


# --- retail order ids: "#W" + 7 digits -------------------------------------------------------------
ORDER_LEADS = [
    "My order number is",
    "The order is",
    "It's order",
    "Order number",
    "it's",
    "yeah it's",
    "",
    "I need to return order",
    "the order ID is",
]
W_FORMS = ["W", "pound W", "hash W", "whiskey", "W as in whiskey", "number W"]
for _ in range(38):
    lead = rng.choice(ORDER_LEADS)
    w = rng.choice(W_FORMS)
    full = digits(7)
    k = rng.randint(0, 6)
    add(
        f"{lead} {w} {say_digits(full[:k], rng.choice(['words', 'written_spaced', 'written']))}{filler()}",
        "incomplete",
        "retail",
        "order_id",
    )
for _ in range(32):
    lead = rng.choice(ORDER_LEADS)
    full = digits(7)
    form = rng.choice(["written", "spoken", "spoken_hash"])
    if form == "written":
        text = f"{lead} #W{full}."
    elif form == "spoken":
        letter = rng.choice(["W", "whiskey", "W as in whiskey"])
        text = f"{lead} {letter} {say_digits(full, rng.choice(['words', 'written_spaced', 'groups']))}"
    else:
        text = f"{lead} {rng.choice(['pound', 'hash'])} W {say_digits(full, 'words')}"
    add(text, "complete", "retail", "order_id")

# --- emails -------------------------------------------------------------------------------------------
EMAIL_LEADS = ["My email is", "The email address is", "email's", "It's", "Sure, my email is", "you can use"]


def email_parts() -> list[str]:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    local = rng.choice(
        [
            f"{first} dot {last}",
            f"{first} underscore {last}",
            f"{first}{last}",
            f"{first} {say_digits(digits(2), 'words')}",
            f"{first} dot {last} {say_digits(digits(2), 'words')}",
        ]
    )
    return [local, "at", rng.choice(PROVIDERS), "dot", rng.choice(TLDS)]


for _ in range(44):
    parts = email_parts()
    cut = rng.choice([1, 2, 3, 4, 2, 4])
    lead = rng.choice(EMAIL_LEADS)
    if cut == 1 and not lead.lower().startswith(("my email", "the email", "email", "sure")):
        lead = "My email is"
    if cut == 3 and parts[2] not in ("gmail", "yahoo", "outlook", "hotmail", "icloud", "proton"):
        lead = rng.choice(["My email is", "The email address is"])
    add(f"{lead} {' '.join(parts[:cut])}{filler()}", "incomplete", "retail", "email")
for _ in range(30):
    parts = email_parts()
    add(f"{rng.choice(EMAIL_LEADS)} {' '.join(parts)}", "complete", "retail", "email")
for _ in range(6):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    add(f"email is {first}.{last}@{rng.choice(PROVIDERS)}.com", "complete", "retail", "email")
    add(f"email is {first}.{last}@{rng.choice(PROVIDERS)}", "incomplete", "retail", "email")

# --- user ids first_last_1234 ---------------------------------------------------------------------------
for domain in ("retail", "airline"):
    for _ in range(14):
        first, last, ds = rng.choice(FIRST), rng.choice(LAST), digits(4)
        pieces = [first, "underscore", last, "underscore", say_digits(ds, "words")]
        cut = rng.choice([2, 3, 4])
        tail = " ".join(pieces[:cut])
        if cut == 4 or rng.random() < 0.5:
            tail = " ".join(pieces[:4]) + " " + " ".join(DIGIT[int(d)] for d in ds[: rng.randint(0, 3)])
        add(
            f"{rng.choice(['my user id is', 'user ID', 'it is', 'the username is'])} {tail}{filler()}",
            "incomplete",
            domain,
            "user_id",
        )
    for _ in range(10):
        first, last, ds = rng.choice(FIRST), rng.choice(LAST), digits(4)
        said = rng.choice(
            [
                f"{first} underscore {last} underscore {say_digits(ds, 'words')}",
                f"{first}_{last}_{ds}",
                f"{first} underscore {last} underscore {ds}",
            ]
        )
        add(
            f"{rng.choice(['my user id is', 'user ID', 'it is', 'the username is'])} {said}",
            "complete",
            domain,
            "user_id",
        )

# --- zip codes ------------------------------------------------------------------------------------------
for _ in range(16):
    z = digits(5)
    add(
        f"{rng.choice(ZIP_LEADS)} {say_digits(z[: rng.randint(1, 4)], 'words')}{filler()}",
        "incomplete",
        rng.choice(["retail", "airline", "telecom"]),
        "zip_code",
    )
for _ in range(20):
    z = digits(5)
    add(
        f"{rng.choice(['the zip code is', 'zip is', 'it is', 'my zip code is', ''])} {say_digits(z)}",
        "complete",
        rng.choice(["retail", "airline", "telecom"]),
        "zip_code",
    )

# --- item / product ids (10 digits) ---------------------------------------------------------------------
for _ in range(18):
    i = digits(10)
    add(
        f"{rng.choice(ITEM_LEADS)} "
        f"{say_digits(i[: rng.randint(1, 9)], rng.choice(['words', 'written_spaced']))}{filler()}",
        "incomplete",
        "retail",
        "item_id",
    )
for _ in range(14):
    i = digits(10)
    add(
        f"{rng.choice(['the item id is', 'product ID', 'item number', ''])} {say_digits(i)}",
        "complete",
        "retail",
        "item_id",
    )

# --- airline reservation codes (6 characters) -----------------------------------------------------------
ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def say_code(code: str) -> str:
    out = []
    for ch in code:
        if ch.isdigit():
            out.append(rng.choice([ch, DIGIT[int(ch)]]))
        elif ch in NATO and rng.random() < 0.3:
            out.append(NATO[ch])
        elif ch in AS_IN and rng.random() < 0.15:
            out.append(f"{ch} as in {AS_IN[ch]}")
        else:
            out.append(ch)
    return " ".join(out)


def make_code() -> str:
    code = [rng.choice(ALNUM) for _ in range(6)]
    if not any(c.isalpha() for c in code):
        code[0] = "K"
    return "".join(code)


for _ in range(26):
    code = make_code()
    add(
        f"{rng.choice([*CODE_LEADS[:3], 'it is', CODE_LEADS[3]])} {say_code(code[: rng.randint(1, 5)])}{filler()}",
        "incomplete",
        "airline",
        "reservation_code",
    )
for _ in range(22):
    code = make_code()
    add(
        f"{rng.choice(CODE_LEADS)} {say_code(code)}",
        "complete",
        "airline",
        "reservation_code",
    )

# --- telecom phone numbers said in groups ---------------------------------------------------------------
for _ in range(26):
    p = rng.choice("2345678") + digits(9)
    groups = [p[:3], p[3:6], p[6:]]
    k = rng.choice([1, 2, 2, 1])
    said = ", ".join(say_digits(g, rng.choice(["words", "written"])) for g in groups[:k])
    if rng.random() < 0.3:
        said += " " + " ".join(DIGIT[int(d)] for d in groups[k][: rng.randint(1, len(groups[k]) - 1)])
    add(
        f"{rng.choice(['my number is', 'the phone number is', 'it is', 'call me at', 'the line is'])} {said}{filler()}",
        "incomplete",
        "telecom",
        "phone_number",
    )
for _ in range(24):
    p = rng.choice("2345678") + digits(9)
    said = ", ".join(say_digits(g, rng.choice(["words", "written"])) for g in (p[:3], p[3:6], p[6:]))
    add(
        f"{rng.choice(['my number is', 'the phone number is', 'it is', 'call me at', ''])} {said}",
        "complete",
        rng.choice(["telecom", "telecom", "retail"]),
        "phone_number",
    )

# --- spelled names ---------------------------------------------------------------------------------------
for _ in range(26):
    name = rng.choice(NAMES)
    cut = rng.randint(1, len(name) - 1)
    style = rng.choice(["letters", "nato", "as_in", "as_in_open", "dashes"])
    if style == "letters":
        said = " ".join(name[:cut])
        if cut == 1:
            said = "it's spelled " + said
    elif style == "nato":
        said = " ".join(NATO.get(c, c) for c in name[:cut])
    elif style == "as_in":
        said = ", ".join(f"{c} as in {AS_IN[c]}" if c in AS_IN else c for c in name[:cut])
    elif style == "as_in_open":
        said = " ".join(name[:cut]) + f" {name[cut]} as" + rng.choice([" in", ""])
    else:
        said = "-".join(name[: max(cut, 2)]) + "-"
    add(
        f"{rng.choice(['my last name is', 'that is', 'the name is', 'spelled', ''])} {said}{filler()}",
        "incomplete",
        rng.choice(["retail", "airline", "telecom"]),
        "spelled_name",
    )
for _ in range(10):
    name = rng.choice(NAMES)
    add(
        f"{name.title()}, {' '.join(name)}, {rng.choice(CLOSINGS)}",
        "complete",
        rng.choice(["retail", "airline"]),
        "spelled_name",
    )

# --- open connectors and announced identifiers ----------------------------------------------------------
for _ in range(16):
    head = rng.choice(["A B C", "the code is X Y", "it's K 4", "account 7 7", "part number B 12", "the ID is Q R"])
    add(
        f"{head} {rng.choice(['dash', 'hyphen', 'underscore', 'slash', 'dot'])}{filler()}",
        "incomplete",
        rng.choice(["retail", "airline", "telecom"]),
        "connector",
    )
for cue in [
    "My order number is",
    "the order ID is",
    "my email address is",
    "The zip code is",
    "my phone number is",
    "my confirmation code is",
    "the reservation number is",
    "my user ID is",
    "The item ID is",
    "my account number's",
]:
    add(cue + rng.choice(["", " uh"]), "incomplete", rng.choice(["retail", "airline", "telecom"]), "announced")
for _ in range(8):
    add(f"it's {say_digits(digits(rng.randint(2, 4)), 'words')} double", "incomplete", "telecom", "multiplier")
for _ in range(12):
    add(
        f"the number is {say_digits(digits(rng.randint(2, 4)), 'words')}{filler()}",
        "incomplete",
        rng.choice(["retail", "telecom"]),
        "digit_run",
    )

# --- ordinary speech ------------------------------------------------------------------------------------
ORDINARY = [
    "I'd like to return the thermostat",
    "Yes, that's right",
    "No, that's not it",
    "Can you check on my order?",
    "I have 2 items to return",
    "I'd like 2",
    "I need three",
    "I bought it on March 3rd",
    "It cost $45",
    "It was about twenty five dollars",
    "I'll take option B",
    "I was born in 1987.",
    "Call me back at 5pm",
    "I'm at home right now",
    "I'll meet you at the airport",
    "I want to change my flight to Boston",
    "The flight leaves at nine",
    "I have two bags",
    "My daughter is 7",
    "It's been 3 weeks",
    "Thank you so much, that's all.",
    "Okay.",
    "mm-hmm",
    "Sure, go ahead",
    "Can I get a refund instead?",
    "It arrived broken",
    "The screen is cracked",
    "I think it's in aisle B",
    "Plan A sounds good",
    "I'd like to upgrade to business class",
    "I live at 42 Main Street",
    "I'm flying to JFK",
    "From SFO to LAX please",
    "Is the iPhone 15 in stock?",
    "I want the 4K TV",
    "Do you have it in size 10?",
    "My bill went up by 20 percent",
    "My data stopped working yesterday",
    "I've been a customer for 10 years",
    "Can you cancel the last order?",
    "I changed my mind",
    "That's everything, thanks",
    "What's my balance?",
    "Please add one more",
    "The room number is on the receipt",
    "I'll wait",
    "Hold on a second",
    "Let me find it",
    "Give me a moment please",
    "Could you repeat that?",
    "Café au lait, s'il vous plaît",
    "Ich möchte zurückgeben",
    "我想退货",
    "Muchas gracias",
    "I need it by Friday",
    "Around 3 or 4",
    "Do you ship to Canada?",
    "I got charged twice",
    "It's a gift for my mom",
    "The box says model X",
    "I want a window seat",
    "Seat 14 is fine",
    "Gate B",
    "I'm in row 12",
    "I'll pay with the same card",
    "Can we do it at noon?",
    "The package is at the door",
    "I'm at work until 6",
    "Vitamin C and zinc",
    "Yes please, that works",
    "Nope",
    "I don't know my order number",
    "I don't remember the zip code",
    "What's the reservation for?",
    "Let's do the 10 o'clock flight",
    "We have 4 passengers",
    "The total was one hundred dollars",
    "I ordered the blue one",
    "It's the large size",
    "I'd prefer the earlier one",
    "My son is flying too",
    "I'll need 2 checked bags",
    "Can you send it to my email?",
    "Use the phone number on file",
    "Same address as before",
    "It came with a dash cam",
    "The charger is USB C",
    "Version 2",
    "I'm on the unlimited plan",
    "It's been like that for a while",
    "OK sounds good",
    "Perfect, thank you",
    "Wait, what?",
    "No I said the other one",
    "That's correct",
    "Correct",
    "Yeah",
    "Right",
    "Exactly",
    "I'd like a refund please",
    "I'll keep the rest",
    "Both of them",
    "Just the first one",
    "The second item",
    "Only the charger",
    "It should be there",
    "I'll check my email",
    "I'll call back later",
    "Can I speak to a manager?",
    "The battery dies after an hour",
    "I'm traveling with my dog",
    "My flight got cancelled",
    "I have a connection in Denver",
    "Do I get miles for this?",
    "I'd rather not",
    "It's urgent",
    "How long will it take?",
]
for sentence in ORDINARY:
    add(sentence, "ordinary", rng.choice(["retail", "airline", "telecom"]), "ordinary")

with OUT.open("w", encoding="utf-8") as fh:
    for row in rows:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
print(f"wrote {len(rows)} endings to {OUT}")
