"""Time conditions of policy claims: how much notice, how long since delivery, which side of a window.

A claim either restates the policy's rule (a *threshold*: "a fee inside 48 hours"), true only with the same boundary, or
states a *case* ("free even on the same day"), true when the policy gives that outcome then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pipecat_harness.grader.verdict import VerdictKind
from pipecat_harness.numbers import Token

__all__ = ["Condition", "anchor_conflict", "claim_polarity", "read_conditions", "unit_hours", "universal",
           "window_claim", "window_outcome"]

_HOURS_PER = {"minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0, "month": 720.0, "year": 8760.0}
_UNIT = {**{word: unit for unit in _HOURS_PER for word in (unit, unit + "s")}, "min": "minute", "mins": "minute",
         "h": "hour", "hr": "hour", "hrs": "hour", "hours'": "hour", "day's": "day", "days'": "day", "week's": "week"}
_COUNT_WORDS = {"a": 1.0, "an": 1.0, "one": 1.0, "few": 3.0, "couple": 2.0, "several": 3.0}
#: Moments said in words, as hours of notice.
_MOMENTS = ((r"\bsame (?:day|morning|afternoon)\b|\bday of\b|\bmorning of\b|\bthat (?:morning|day)\b", 4.0),
            (r"\bnight before\b|\bevening before\b", 12.0), (r"\blast[ -]minute\b|\ban hour before\b", 1.0),
            (r"\bday before\b", 24.0))
_UNDER_RE = re.compile(r"\b(?:under|within|inside|less than|fewer than|late|short notice|have|get|got)\b")
_AT_LEAST_RE = re.compile(
    r"\b(?:at least|more than|or more|as long as|if|with|by|as late as|any time before|prior|until|up until|"
    r"in advance|over|beyond)\b")
_UNIVERSAL_RE = re.compile(r"\b(?:at all|always|anytime|any time|no matter when|whenever|no questions asked)\b")
_POSITIVE_RE = re.compile(
    r"\bfree\b|\bno (?:charge|fee|cost|penalty)\b|\bnot charge\b|\bdon't charge\b|\bwon't charge\b|"
    r"\bdoesn't cost\b|\bcosts? nothing\b|\bwithout (?:any |a )?(?:fee|charge|penalty)\b|\bno extra\b|"
    r"\bat no (?:charge|cost)\b|\bno problem\b|\bfine\b|\bwithin the\b|\bstill within\b|\bcan return\b|"
    r"\bare accepted\b|\bis accepted\b")
_NEGATIVE_RE = re.compile(
    r"\b(?:fee|charge|penalty|cost|costs)\b|\$|\bcan't\b|\bcannot\b|\bnot eligible\b|\boutside\b|\bpast the\b|"
    r"\btoo late\b|\bwon't be able\b|\bno longer\b|\bisn't\b|\baren't\b")
_ANCHORS = {"delivery": {"delivery", "delivered", "arrival", "arrived", "arrives", "received", "receive", "got"},
            "purchase": {"purchase", "purchased", "bought", "order", "ordered", "buy", "checkout", "paid"},
            "shipping": {"shipped", "shipping", "ships", "dispatch", "dispatched"}}


@dataclass(frozen=True)
class Condition:
    """A time condition said in a claim: the boundary or moment in ``hours``, and its ``kind``.

    ``kind`` is ``case`` (at this moment), ``at_least`` (this much or more) or ``under`` (less than this);
    ``boundary_given`` is ``False`` when no hours were said ("late cancellations": the policy's own boundary).
    """

    hours: float
    kind: Literal["case", "at_least", "under"]
    boundary_given: bool = True


def unit_hours(word: str) -> float:
    """Hours in one of a duration unit's words ("days" -> 24); ``KeyError`` for other words."""
    return _HOURS_PER[_UNIT[word]]


def _kind(before: str, after: str) -> Literal["case", "at_least", "under"]:
    if "up to" in before:
        return "at_least" if re.search(r"\b(?:before|ahead|notice|prior|in advance|out)\b", after) else "under"
    if _UNDER_RE.search(before):
        return "under"
    if _AT_LEAST_RE.search(before) or re.match(r"\s*or more\b", after):
        return "at_least"
    return "case"


def read_conditions(tokens: list[Token]) -> list[Condition]:
    """Time conditions in a sentence, each with its kind."""
    words = [t.word for t in tokens]
    found: list[Condition] = []
    for i, token in enumerate(tokens[:-1]):
        after_of = words[i + 2] if words[i + 1] == "of" and i + 2 < len(words) else ""
        unit = _UNIT.get(words[i + 1]) or _UNIT.get(after_of)
        count = token.number.value if token.number is not None else _COUNT_WORDS.get(words[i])
        if unit is None or count is None:
            continue
        if words[i] in {"a", "an"} and i and words[i - 1] in {"once", "per", "twice"}:
            continue  # "once a day" is a frequency
        skip = 1 if words[i] == "few" and i and words[i - 1] == "a" else 0  # "a few days": before the "a"
        before, after = " ".join(words[max(0, i - 4 - skip) : i - skip]), " ".join(words[i + 2 : i + 6])
        ago = re.search(r"\bago\b", after) or (
            re.search(r"\b(?:been|it's been)\b", before) and "more than" not in before)
        found.append(Condition(count * _HOURS_PER[unit], "case" if ago else _kind(before, after)))
    text = " ".join(words)
    moment = next(((match, hours) for pattern, hours in _MOMENTS if (match := re.search(pattern, text))), None)
    if not found and moment is not None:
        # A moment is a case ("if you cancel on the same day") unless it bounds one ("by the morning of").
        bounded = re.search(r"\b(?:by|as late as|until|up to|up until)\b", text[: moment[0].start()][-20:])
        found.append(Condition(moment[1], "at_least" if bounded else "case"))
    if not found and re.search(r"\blate (?:cancell?ations?|cancel|reschedul\w*)\b|\bshort notice\b", text):
        found.append(Condition(0.0, "under", boundary_given=False))
    return found


def universal(text: str) -> bool:
    """Whether a claim says its outcome holds whenever ("no fee at all", "return it anytime")."""
    return bool(_UNIVERSAL_RE.search(text))


def claim_polarity(text: str) -> bool | None:
    """Whether a claim gives the caller the good outcome (free, allowed: ``True``), the bad one, or neither."""
    positive = bool(_POSITIVE_RE.search(text))
    negative = bool(_NEGATIVE_RE.search(re.sub(_POSITIVE_RE, " ", text)))
    return None if positive == negative else positive


def window_outcome(window_hours: float, inside: bool, positive_inside: bool, at_hours: float) -> bool:
    """The policy's outcome (good: ``True``) at ``at_hours`` of notice or elapsed time."""
    return (at_hours < window_hours if inside else at_hours >= window_hours) == positive_inside


def anchor_conflict(claim: str, statement: str) -> tuple[str, str] | None:
    """The time anchors when claim and policy count from different events ("of purchase" vs "of delivery")."""

    def anchor(text: str) -> str | None:
        words = set(re.findall(r"[a-z]+", text))
        return next((name for name, group in _ANCHORS.items() if words & group), None)

    policy, said = anchor(statement), anchor(claim)
    return (said, policy) if policy is not None and said is not None and policy != said else None


def window_claim(conditions: list[Condition], text: str, statement: str, window: float, inside: bool,
                 good_inside: bool) -> tuple[VerdictKind, str] | None:
    """Judge what a claim says about a policy's time window (its conditions, or "whenever"): verdict and why.

    ``good_inside``: the good side is inside the window ("free up to...", "returns within...").
    """
    polarity = claim_polarity(text)
    conflict = anchor_conflict(text, statement)
    if conflict is not None and conditions:
        return "unsupported", f"counted the window from {conflict[0]}, not {conflict[1]}"
    if universal(text) and polarity is not None and not conditions:
        return "unsupported", "said it holds at any time"
    for condition in conditions:
        if condition.kind == "case":
            if polarity is None:
                continue
            if polarity != window_outcome(window, inside, good_inside, condition.hours):
                return "unsupported", f"the condition fails at {condition.hours:g} hours (the claim says the opposite)"
            return "supported", "the condition holds at that time"
        if condition.boundary_given and abs(condition.hours - window) > max(0.5, window * 0.02):
            return "unsupported", f"stated a {condition.hours:g}-hour limit"
        side = window - 0.001 if condition.kind == "under" else window + 0.001
        if polarity is not None and polarity != window_outcome(window, inside, good_inside, side):
            return "unsupported", "turned the time window around"
        return "supported", "time window matches"
    return None
