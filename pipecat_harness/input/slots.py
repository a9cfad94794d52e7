"""The slot a caller is answering, and the turn read into that slot's alphabet.

The agent's last question and the tools' schemas say which identifier comes next; the turn is read for that slot
the way the agent would read it back (formatting undone, homophones resolved, "double" repeated, "as in" and
corrections applied), and :func:`slot_decision` releases what is complete or cannot be completed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from pipecat_harness.input.identifier_formats import ALL_FORMATS, KNOWN_TLDS, IdentifierFormat, IdentifierHoldConfig
from pipecat_harness.spoken import (
    DIGIT_HOMOPHONES,
    DIGIT_WORDS,
    LETTER_HOMOPHONES,
    MULTIPLIER_WORDS,
    NATO_WORDS,
    written_to_spoken,
)

__all__ = ["SPELLED_NAME", "expected_format", "expecting", "formats_from_tools", "read_slot", "slot_decision"]

_NAME_CUES = frozenset({"spell", "spelled", "spelling", "surname", "last", "name"})
#: A spelled name: no fixed shape; complete when the letters spell the name the caller said.
SPELLED_NAME = IdentifierFormat("last_name", re.compile(r"(?!)"), re.compile(r"[A-Z]{1,40}"), _NAME_CUES,
                                fixed_length=False)
#: The alphabet of each slot; any other (order id, reservation code, user id) is "alnum".
_SLOT_KINDS = {**dict.fromkeys(("zip_code", "phone_number", "item_id"), "digits"), "last_name": "letters",
               "email": "email"}
_CORRECTIONS = re.compile(r"\b(?:no,?\s+sorry|sorry,?\s+i\s+mean|wait,?\s+no|i\s+mean|sorry|no\s+no)\b[,.]?",
                          re.IGNORECASE)
_TOKEN_EDGES = re.compile(r"^[^\w\x00\x01]+|[^\w\x00\x01]+$")
_AS_IN = re.compile(r"\b(?:as|is|s|and)\s+in\s+([A-Z]?[a-z]+)", re.IGNORECASE)
#: Words a caller says between the symbols of an identifier; any other word there is the recogniser's.
_GLUE = frozenset("in and then is it's that's its it um uh er so okay ok yeah no dash hyphen space the".split())
#: This many stray words inside the identifier: the recogniser damaged it, and waiting cannot repair it.
GARBLED_STRAY_WORDS = 2
#: One symbol short of complete is released when the complete identifier is at least this long: callers pause
#: between groups, not before the last of six or more characters; the recogniser dropped one.
ONE_SHORT_MIN_LENGTH = 6


def expected_format(question: str, formats: Iterable[IdentifierFormat]) -> IdentifierFormat | None:
    """The format among ``formats`` whose cue words the agent's last question (in ``question``) names last."""
    asked = [q for q in re.split(r"(?<=[.!?])\s+", question.strip()) if q.endswith("?")]
    words = re.findall(r"[a-z\-]+", (asked[-1] if asked else question).lower())
    best: tuple[int, int, IdentifierFormat] | None = None
    for order, fmt in enumerate(formats):
        cues = fmt.cues | {fmt.name.replace("_", " ").split()[0]}
        hits = [i for i, w in enumerate(words) if w in cues and w not in {"number", "name", "address"}]
        if fmt is SPELLED_NAME and not {"spell", "spelled", "spelling"} & set(words):
            continue
        if hits and (best is None or (hits[-1], -order) > best[:2]):
            best = (hits[-1], -order, fmt)
    return best[2] if best else None


def formats_from_tools(tools: Iterable[Mapping[str, Any]], known: Iterable[IdentifierFormat]) -> list[IdentifierFormat]:
    """Formats the tools' JSON-Schema ``properties`` declare: a string argument named like a ``known`` format.

    Its ``pattern`` (when given) replaces the format's complete form; its description's words become cues.
    """
    by_name = {fmt.name: fmt for fmt in known}
    out: list[IdentifierFormat] = []
    for properties in tools:
        for name, schema in properties.items():
            base = by_name.get(name) or next((f for n, f in by_name.items() if n.split("_")[0] in name), None)
            if base is None or not isinstance(schema, Mapping) or schema.get("type", "string") != "string":
                continue
            pattern = schema.get("pattern")
            complete = re.compile(pattern.strip("^$"), re.ASCII | re.IGNORECASE) if pattern else base.complete
            cues = base.cues | frozenset(re.findall(r"[a-z]+", str(schema.get("description", "")).lower())[:6])
            out.append(replace(base, complete=complete, cues=cues))
    return out


def _symbols(token: str, kind: str, previous: str) -> str:
    """The slot symbols one spoken token stands for ("" for an ordinary word)."""
    lower = token.lower()
    digits = kind in ("digits", "alnum")
    letters = kind in ("letters", "alnum")
    if digits and lower in DIGIT_WORDS and (lower != "o" or previous.isdigit()):
        return DIGIT_WORDS[lower]
    if lower.isdigit() and digits:
        return lower
    if letters and lower in NATO_WORDS:
        return NATO_WORDS[lower]
    if letters and len(token) == 1 and token.isalpha() and token.isascii() and (token.isupper() or lower not in "ai"):
        return token.upper()
    fused = (token.isalpha() and 2 <= len(token) <= 8) or (kind == "alnum" and token.isalnum())  # fused: "SAN", "HB7H"
    return token if letters and token.isascii() and token.isupper() and fused else ""


def read_slot(text: str, fmt: IdentifierFormat) -> str:
    """``text`` read into ``fmt``'s alphabet, in the written form the format matches (``W3940283``)."""
    return _read(text, fmt)[0]


def _read(text: str, fmt: IdentifierFormat) -> tuple[str, int]:
    """The slot's symbols, and how many other words the recogniser wrote between them."""
    kind = _SLOT_KINDS.get(fmt.name, "alnum")
    homophones = DIGIT_HOMOPHONES if kind in ("digits", "alnum") else LETTER_HOMOPHONES if kind == "letters" else {}
    # "N as in Mary": the example word's initial is the letter (recognisers confuse N and M, not Mary and Nancy).
    marked = _CORRECTIONS.sub(" \x00 ", _AS_IN.sub(lambda m: f" \x01{m.group(1)[0].upper()} ", text))
    spoken = written_to_spoken(marked)
    tokens = [t for raw in spoken.split() for t in _TOKEN_EDGES.sub("", raw).split("-") if t]
    out: list[str] = []
    repeat = 1
    pending: list[str] = []  # homophones, kept only between symbols of the slot
    after_example = False  # the last token was an "as in" example: a second one names a letter of its own
    stray = 0  # words between symbols that are none of the slot's (the recogniser's damage, not the caller's)
    since_symbol = 0
    for token in tokens:
        was_example, after_example = after_example, token.startswith("\x01")
        if token == "\x00":
            if out:
                out.pop()
            pending, repeat = [], 1
            continue
        if token.startswith("\x01"):
            if out and out[-1][-1].isalpha() and not was_example:
                out[-1] = out[-1][:-1] + token[1:]
            elif kind != "digits":
                out.append(token[1:])
            continue
        if token.lower() in MULTIPLIER_WORDS:
            repeat = MULTIPLIER_WORDS[token.lower()]
            continue
        symbols = _symbols(token, kind, out[-1][-1] if out else "")
        if not symbols:
            homophone = homophones.get(token.lower(), "")
            # Kept only between symbols of the slot, or right before one ("are O-S-S-I").
            pending = [*pending, homophone] if homophone and (out or not pending) else []
            if not homophone:
                repeat = 1
                since_symbol += bool(out) and token.lower() not in _GLUE
            continue
        stray += since_symbol
        since_symbol = 0
        out.extend(pending if out or len(pending) == 1 else [])
        pending = []
        out.append(symbols[0] * repeat + symbols[1:])
        repeat = 1
    return "".join(out), stray


def _fixed_length(fmt: IdentifierFormat) -> int | None:
    """The length of a complete identifier when the format has one (probed on its complete pattern)."""
    probes = ((lead + filler * n)[:n] for n in range(1, 16) for filler in "0A" for lead in ("", "W", "A"))
    return next((len(p) for p in probes if fmt.is_complete(p)), None) if fmt.fixed_length else None


def _name_decision(text: str, letters: str) -> tuple[bool, str, str]:
    said = [w.upper() for w in re.findall(r"\b[A-Z][a-z]{2,}\b", text)]
    if not letters:
        return True, "the name has not been spelled yet", "slot_open:last_name"
    for name in said:
        close = len(letters) >= len(name) - 1 and difflib.SequenceMatcher(None, letters, name).ratio() >= 0.7
        if letters == name or close:
            return False, f"spelled {name} as said", "complete:last_name"
        if name.startswith(letters):
            return True, f"spelling of {name} so far", "prefix:last_name"
    return True, f"open spelled run ({len(letters)} letters)", "spelled_letters"


#: Words of a reply that is not the identifier ("I don't have it", "what do you mean?"): never held for the slot.
_NOT_AN_ANSWER = re.compile(r"\b(?:don't|dont|do not|can't|cannot|no idea|not sure|what|why|which|how|where|forgot|lost"
                            r"|remember|never mind)\b|\?\s*$", re.IGNORECASE)
#: An answer that has said nothing of the slot yet is held only while it is short (a lead-in: "It's ...").
_LEAD_IN_WORDS = 8


def slot_decision(text: str, fmt: IdentifierFormat) -> tuple[bool, str, str, str] | None:
    """Hold or release for the expected slot: ``(hold, reason, rule, identifier)``, or ``None`` to defer.

    A reply that is not the identifier ("I don't have it"), or a long one with nothing of the slot, is deferred
    to the ending rules.
    """
    if fmt.name == "email":
        lowered = text.lower().rstrip(" .!?")
        tld = re.search(r"(?:\.|\bdot\s+)([a-z]{2,6})$", lowered)
        if tld and tld.group(1) in KNOWN_TLDS:
            reason = "the address ends in a domain: complete as heard (the agent reads it back)"
            return False, reason, "complete:email_heard", ""
        if _NOT_AN_ANSWER.search(text):
            return None
        return True, "an address with no domain yet", "slot_prefix:email", ""
    ident, stray = _read(text, fmt)
    if fmt is SPELLED_NAME or fmt.name == "last_name":
        if not ident and _NOT_AN_ANSWER.search(text):
            return None
        hold, reason, rule = _name_decision(text, ident)
        return hold, reason, rule, ident
    if not ident:  # a short answer with nothing of the slot in it yet: the identifier is coming
        if _NOT_AN_ANSWER.search(text) or len(text.split()) > _LEAD_IN_WORDS:
            return None
        return True, "the slot was asked for and none of it has arrived yet", "slot_empty", ""
    if fmt.is_complete(ident):
        return False, f"complete {fmt.name} (the slot asked for)", f"complete:{fmt.name}", ident
    length = _fixed_length(fmt)
    if stray >= GARBLED_STRAY_WORDS:
        reason = f"{stray} stray words inside the {fmt.name}: the recogniser damaged it, waiting cannot repair it"
        return False, f"{reason} (the agent reads it back)", f"garbled:{fmt.name}", ident
    # A leading letter the recogniser lost ("It's not a loop. 3.5." for "It's W, three five") leaves a prefix.
    if fmt.is_prefix(ident) or (ident.isdigit() and any(fmt.is_prefix(c + ident) for c in "W#")):
        if length is not None and length >= ONE_SHORT_MIN_LENGTH and len(ident) == length - 1:
            return _unfinishable(f"one symbol short of a {fmt.name}", f"one_short:{fmt.name}", ident)
        return True, f"prefix of the {fmt.name} the slot asked for", f"slot_prefix:{fmt.name}", ident
    if length is not None and len(ident) == length - 1 and any(fmt.is_complete(c + ident) for c in "W#A"):
        return _unfinishable(f"a {fmt.name} missing its first symbol", f"one_short:{fmt.name}", ident)
    if length is not None and len(ident) > length:
        return _unfinishable(f"longer than a {fmt.name}", f"overlong:{fmt.name}", ident)
    return _unfinishable(f"no continuation makes this a {fmt.name}", f"not_prefix:{fmt.name}", ident)


def _unfinishable(what: str, rule: str, ident: str) -> tuple[bool, str, str, str]:
    return False, f"{what}: waiting cannot complete it", rule, ident


def expecting(config: IdentifierHoldConfig, question: str,
              tools: Iterable[Mapping[str, Any]] = ()) -> IdentifierHoldConfig:
    """``config`` expecting the identifier the agent's ``question`` asks for (``expected=None``: none).

    The slot's format comes from the tools' argument schemas when one names it, else from the domain formats.
    """
    candidates = [*formats_from_tools(tools, (*config.formats, *ALL_FORMATS)), *config.formats, SPELLED_NAME]
    return replace(config, expected=expected_format(question, candidates))
