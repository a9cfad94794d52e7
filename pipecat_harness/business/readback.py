"""Whether a read-back the caller heard states a proposal's material arguments, compared as values.

A "yes" confirms what the caller heard, not what the tool call holds. Amounts, dates, times and targets are looked for
in the played text *as values* (``42.5``: "forty-two fifty"; ``18:00``: "six p.m."; ``#W2378156``: "W two three
seven..."), read by :mod:`pipecat_harness.numbers`; free text is not material.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pipecat_harness.numbers import read_numbers, tokenize
from pipecat_harness.spoken import spoken_to_identifier

__all__ = ["material_arguments", "spoken_values", "unstated_arguments"]

_DAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow"}
_MONTHS = "january february march april may june july august september october november december".split()
_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::\d{2})?$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_MATERIAL_NAME = re.compile(r"(^|_)(id|ids|amount|usd|price|total|quantity|qty|date|day|time|email|phone|zip|"
                            r"account|target|to|number)$")
_CENTS = {"cents", "cent"}
_DOLLARS = {"dollars", "dollar", "bucks", "usd", "$"}


def material_arguments(arguments: Mapping[str, Any], hidden: Iterable[str] = ()) -> dict[str, Any]:
    """The arguments a read-back must state: numbers, values with digits, days and months, named targets."""
    skip = frozenset(hidden)
    return {name: value for name, value in arguments.items() if name not in skip and value not in (None, "")
            and not isinstance(value, bool) and _is_material(name, value)}


def _is_material(name: str, value: Any) -> bool:
    if isinstance(value, int | float):
        return True
    if isinstance(value, list | tuple):
        return any(_is_material(name, v) for v in value)
    text = str(value).strip().lower()
    if any(c.isdigit() for c in text) or text in _DAYS or text in _MONTHS or "@" in text:
        return True
    return bool(_MATERIAL_NAME.search(name.lower()))


def spoken_values(text: str) -> set[float]:
    """Every numeric value ``text`` can be heard as (a price, a time as ``h.mm``, dollars and cents)."""
    tokens = read_numbers(tokenize(text))
    values: set[float] = set()
    for index, token in enumerate(tokens):
        number = token.number
        if number is None:
            continue
        values.add(round(number.value, 2))
        groups = number.groups
        if len(groups) == 2:
            values.update({round(groups[0] + groups[1] / 100, 2), float(groups[0] * 100 + groups[1])})
        # "forty two dollars and fifty cents"
        rest = tokens[index + 1 : index + 4]
        words = [t.word for t in rest]
        if words and words[0] in _DOLLARS:
            cents = next((t.number for t in rest[1:] if t.number is not None), None)
            follow = tokens[index + 2 + (1 if len(words) > 1 and words[1] == "and" else 0) :][:2]
            if cents is not None and any(t.word in _CENTS for t in follow):
                values.add(round(number.value + cents.value / 100, 2))
    return values


def _stated(value: Any, heard: str, values: set[float]) -> bool:
    if isinstance(value, list | tuple):
        return all(_stated(v, heard, values) for v in value if v not in (None, ""))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return any(abs(v - float(value)) < 0.005 for v in values)
    text = str(value).strip()
    lower = heard.lower()
    if time := _TIME.match(text):
        hour, minute = int(time.group(1)), int(time.group(2))
        wanted = {round(hour + minute / 100, 2), round((hour % 12 or 12) + minute / 100, 2)}
        return bool(wanted & values) or (minute == 30 and "half past" in lower)
    if date := _DATE.match(text):
        month, day = int(date.group(2)), int(date.group(3))
        return float(day) in values and (_MONTHS[month - 1] in lower or float(month) in values)
    if text.lower() in _DAYS or text.lower() in _MONTHS:
        return re.search(rf"\b{re.escape(text.lower())}\b", lower) is not None
    if text.lower() in lower:
        return True
    digits = re.sub(r"\D", "", text)
    if digits and len(digits) <= 3:
        with contextlib.suppress(ValueError):
            return float(text.replace("$", "").replace(",", "")) in values
    if digits:
        return digits in re.sub(r"\D", "", spoken_to_identifier(heard))
    compact = spoken_to_identifier(heard).lower()
    return text.lower().replace(" ", "") in compact


def unstated_arguments(arguments: Mapping[str, Any], heard: str, hidden: Iterable[str] = ()) -> list[str]:
    """Names of the material ``arguments`` the read-back ``heard`` does not state (``hidden``: never read back)."""
    values = spoken_values(heard)
    return [name for name, value in material_arguments(arguments, hidden).items() if not _stated(value, heard, values)]
