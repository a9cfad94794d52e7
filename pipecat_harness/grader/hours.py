"""Hours claims: days, opening and closing times, "closed on Sundays", time zones."""

from __future__ import annotations

from datetime import time

from pipecat_harness.grader.constraints import WEEKDAYS, ConstraintList, DayHours
from pipecat_harness.grader.prices import DURATION_UNITS
from pipecat_harness.grader.verdict import Verdict
from pipecat_harness.numbers import Token, negated

__all__ = ["check_hours", "find_days"]

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_WORDS = {form: name[:3] for name in _DAYS for form in (name, name + "s", name[:3])}
_GROUP_WORDS = {"weekdays": WEEKDAYS[:5], "weekday": WEEKDAYS[:5], "weekends": WEEKDAYS[5:], "weekend": WEEKDAYS[5:],
                "daily": WEEKDAYS, "everyday": WEEKDAYS}
_ZONE_WORDS = {"America/New_York": "eastern est edt et", "America/Chicago": "central cst cdt",
               "America/Denver": "mountain mst mdt", "America/Los_Angeles": "pacific pst pdt", "UTC": "utc gmt"}
_ZONES = {word: zone for zone, words in _ZONE_WORDS.items() for word in words.split()}
_OPEN_WORDS = {"open", "opens", "opening"}
_CLOSE_WORDS = {"close", "closes", "closing", "shut", "shuts"}
_HOURS_CUES = _OPEN_WORDS | _CLOSE_WORDS | {"closed", "hours", "until", "till", "til", "twentyfourseven"}
#: Words before "hours" that make it a duration ("takes about two hours"), before "opening" a free slot ("an opening").
_DURATION_COUNTS = {"an", "few", "couple", "several", "24"}
_SLOT_WORDS = {"an", "any", "the", "one", "no", "some", "next", "first"}
_NAMED_TIMES = {"noon": [time(12, 0)], "midnight": [time(0, 0), time(23, 59)]}


def find_days(tokens: list[Token]) -> list[str]:
    """Weekdays a sentence talks about, with ranges ("monday through friday") expanded."""
    words = [t.word for t in tokens]
    days: list[str] = []
    for i, word in enumerate(words):
        if word in _DAY_WORDS:
            day = _DAY_WORDS[word]
            if days and i >= 2 and words[i - 1] in {"through", "to", "thru", "-"} and words[i - 2] in _DAY_WORDS:
                start = WEEKDAYS.index(days[-1])
                days.extend(WEEKDAYS[start + 1 : WEEKDAYS.index(day) + 1])
            elif day not in days:
                days.append(day)
        elif word in _GROUP_WORDS or words[i : i + 2] == ["every", "day"] or words[i : i + 3] == ["seven", "days", "a"]:
            days.extend(d for d in _GROUP_WORDS.get(word, WEEKDAYS) if d not in days)
    return days


def _candidates(tokens: list[Token], i: int) -> list[time]:
    """Possible clock times for the number at ``i`` (am and pm when not said)."""
    token = tokens[i]
    following = [t.word for t in tokens[i + 1 : i + 4]]
    if token.word in _NAMED_TIMES:
        return list(_NAMED_TIMES[token.word])
    number = token.number
    assert number is not None
    if number.minutes is not None or len(number.groups) == 2:
        hour, minute = number.groups[0], number.groups[1]
    elif number.groups and number.groups[0] >= 100 and number.groups[0] % 100 < 60:
        hour, minute = divmod(number.groups[0], 100)
    else:
        hour, minute = int(number.value), 0
    if hour > 24 or minute > 59:
        return []
    if following[:1] == ["pm"] or {"evening", "afternoon", "night"} & set(following):
        hours = [hour + 12 if hour < 12 else hour]
    elif following[:1] == ["am"] or "morning" in following:
        hours = [0 if hour == 12 else hour]
    else:
        hours = [hour, hour + 12] if hour < 12 else [hour]
    return [time(23, 59) if h == 24 else time(h % 24, minute) for h in hours]


def _times(tokens: list[Token]) -> list[tuple[str, list[time]]]:
    """Times in a sentence, each with its role: ``opens``, ``closes`` or ``open_at``."""
    found: list[tuple[str, list[time]]] = []
    words = [t.word for t in tokens]
    for i, token in enumerate(tokens):
        if not (token.number is not None or token.word in {"noon", "midnight"}):
            continue
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if nxt in DURATION_UNITS or nxt in {"%", "percent", "dollars"} or (i and words[i - 1] in {"$", "€", "£"}):
            continue
        candidates = _candidates(tokens, i)
        if not candidates:
            continue
        before = words[max(0, i - 3) : i]
        prev = before[-1] if before else ""
        if prev in {"until", "till", "til", "to", "through", "-"} or (set(before) & _CLOSE_WORDS):
            role = "closes"
        elif prev == "from" or (set(before) & _OPEN_WORDS and prev == "at" and not _is_state(before)):
            role = "opens"
        elif prev in {"at", "by"} and _is_state(before):
            role = "open_at"
        elif found and found[-1][0] == "opens":
            role = "closes"
        else:
            role = "opens"
        found.append((role, candidates))
    return found


def _is_state(before: list[str]) -> bool:
    """Whether the words say the business *is* open then ("we're open at 10"), not when it opens."""
    return any(w in {"we're", "are", "is", "be", "still"} for w in before)


def check_hours(tokens: list[Token], sentence: str, constraints: ConstraintList) -> list[Verdict]:
    """Check what a sentence says about opening hours against the list."""
    words = [t.word for t in tokens]
    cues = set(words) & _HOURS_CUES
    before_hours = [tokens[i - 1] for i, w in enumerate(words) if w == "hours" and i]
    if words[:1] != ["hours"] and all(t.number is not None or t.word in _DURATION_COUNTS for t in before_hours):
        cues.discard("hours")  # "takes about two hours" is a duration, not opening hours
    if all(words[i - 1] in _SLOT_WORDS for i, w in enumerate(words) if w == "opening" and i):
        cues.discard("opening")  # "an opening at three" is a free slot, not when the shop opens
    if not cues and not (find_days(tokens) and _time_range(tokens)):
        return []
    week = constraints.week()
    if not week:
        return [Verdict("out_of_scope", sentence, "hours", "hours", "the constraint list gives no hours", 0.6)]
    verdicts: list[Verdict] = []
    zone = next((_ZONES[w] for w in words if w in _ZONES), None)
    if zone is not None and zone != constraints.timezone:
        why = f"hours are in {constraints.timezone}, the agent said {zone}"
        verdicts.append(Verdict("unsupported", sentence, "hours", "timezone", why, 0.85))
    for segment in _segments(tokens):
        verdicts += _check_segment(segment, sentence, week)
    return verdicts


def _time_range(tokens: list[Token]) -> bool:
    """Whether the sentence says a span of clock times ("eight to six", "9 am - 5 pm")."""
    return any(tokens[i].number is not None and tokens[i + 2].number is not None
               and (tokens[i + 1].word in {"to", "-", "till", "until"}
                    or (tokens[i + 1].word == "and" and i > 0 and tokens[i - 1].word == "between"))
               for i in range(len(tokens) - 2))


def _segments(tokens: list[Token]) -> list[list[Token]]:
    """Split "closed Sunday, but Monday we open at 8" into one part per set of days."""
    segments: list[list[Token]] = [[]]
    for token in tokens:
        current = segments[-1]
        starts_days = token.word in _DAY_WORDS or token.word in _GROUP_WORDS
        said = [t.word for t in current]
        has_days = bool(find_days(current))
        has_claim = any(t.number is not None for t in current) or "closed" in said
        if starts_days and has_days and has_claim and not (said and said[-1] in {"through", "to", "thru", "-"}):
            cut = max((i for i, w in enumerate(said) if w in {"and", "but"}), default=len(current))
            segments[-1] = current[:cut]
            segments.append(current[cut:])
        segments[-1].append(token)
    return [s for s in segments if s]


def _check_segment(tokens: list[Token], sentence: str, week: dict[str, DayHours]) -> list[Verdict]:
    words = [t.word for t in tokens]
    said_days = [d for d in find_days(tokens) if d in week]
    days = said_days or list(week)
    ref = "hours." + ("/".join(days) if said_days else "week")
    times = _times(tokens)
    if "twentyfourseven" in words or ("24" in words and "hours" in words and "open" in words):
        ok = all(week[d].opens == time(0, 0) and week[d].closes == time(23, 59) for d in days)
        return [_verdict(ok, sentence, ref, "open around the clock", week, days)]
    if times:
        # Without a day, the times must hold for at least one listed day.
        check = all if said_days else any
        ok = check(all(_fits(role, cands, week[d]) for role, cands in times) for d in days)
        return [_verdict(ok, sentence, ref, "times", week, days)]
    if not said_days:
        return []
    if "closed" in words and not (set(words) & {"closes", "close", "until", "till"}):
        index = words.index("closed")
        claim_closed = not any(w in {"not", "never", "aren't", "isn't"} or w.endswith("n't")
                               for w in words[max(0, index - 3) : index])
    elif set(words) & _OPEN_WORDS:
        claim_closed = negated(words)
    else:
        return []
    ok = all(week[d].closed == claim_closed for d in days)
    return [_verdict(ok, sentence, ref, "closed" if claim_closed else "open", week, days)]


def _fits(role: str, candidates: list[time], day: DayHours) -> bool:
    if day.opens is None or day.closes is None:
        return False
    if role == "open_at":
        return any(day.opens <= c < day.closes for c in candidates)
    return (day.opens if role == "opens" else day.closes) in candidates


def _verdict(ok: bool, sentence: str, ref: str, what: str, week: dict[str, DayHours], days: list[str]) -> Verdict:
    spans = ["closed" if week[d].opens is None or week[d].closes is None
             else f"{week[d].opens:%H:%M}-{week[d].closes:%H:%M}" for d in days]
    listed = "; ".join(f"{d} {span}" for d, span in zip(days, spans, strict=True))
    why = f"matches the listed hours ({listed})" if ok else f"said {what}, but the listed hours are {listed}"
    return Verdict("supported" if ok else "unsupported", sentence, "hours", ref, why, 0.9)
