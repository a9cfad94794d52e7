"""Price claims: amounts, currencies and ranges said about listed services."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pipecat_harness.grader.constraints import ConstraintList, PriceItem
from pipecat_harness.grader.verdict import Verdict, VerdictKind
from pipecat_harness.numbers import Token, stem, tokenize

__all__ = ["DURATION_UNITS", "TIME_WORDS", "Amount", "check_prices", "find_amounts", "find_services"]

_CURRENCY_BEFORE = {"$": "USD", "usd": "USD", "€": "EUR", "eur": "EUR", "£": "GBP", "gbp": "GBP"}
_CURRENCY_AFTER = {"dollar": "USD", "dollars": "USD", "bucks": "USD", "usd": "USD", "euro": "EUR", "euros": "EUR",
                   "eur": "EUR", "pound": "GBP", "pounds": "GBP", "gbp": "GBP"}
_SYMBOL = {code: sign for sign, code in _CURRENCY_BEFORE.items() if not sign.isalpha()}  # "USD" -> "$"
DURATION_UNITS = {"minute", "minutes", "min", "mins", "hour", "hours", "h", "hr", "hrs", "day", "days", "week", "weeks",
                  "month", "months", "year", "years"}
TIME_WORDS = {"am", "pm", "o'clock", "oclock", "noon", "midnight", "morning", "evening", "afternoon", "tonight"}
_PRICE_CUES = {"cost", "costs", "price", "prices", "priced", "pricing", "charge", "charges", "fee", "fees", "runs",
               "run", "rate", "pay", "total", "quote", "starts", "starting", "only", "just"}
_HOURS_CUES = {"open", "opens", "close", "closes", "closed", "hours", "until", "till", "til", "closing", "opening"}
_RANGE_WORDS = {"to", "and", "through", "-"}
#: Words that say one amount is the total of several services ("an exam plus x-rays comes to $145").
_TOTAL_WORDS = {"plus", "together", "total", "altogether", "combined", "comes", "come", "both"}
_PERCENT_WORDS = {"%", "percent"}


@dataclass(frozen=True)
class Amount:
    """A money amount said at token ``position``: ``value`` to ``high``, ``alternative`` the other reading of it."""

    value: float
    currency: str
    high: float | None = None
    position: int = 0
    alternative: float | None = None

    def spoken(self) -> str:
        """The amount written back ("$149", "€100-€150")."""
        symbol = _SYMBOL.get(self.currency, self.currency + " ")
        text = f"{symbol}{self.value:g}"
        return text if self.high is None else f"{text}-{symbol}{self.high:g}"


def _word(tokens: list[Token], index: int) -> str:
    return tokens[index].word if 0 <= index < len(tokens) else ""


def _kind(tokens: list[Token], i: int, hours_context: bool) -> str:
    """Classify the number at ``i``: money, percent, duration, time or plain."""
    number = tokens[i].number
    assert number is not None
    prev, nxt, after = _word(tokens, i - 1), _word(tokens, i + 1), _word(tokens, i + 2)
    if prev in _CURRENCY_BEFORE or nxt in _CURRENCY_AFTER or nxt == "cents":
        return "money"
    if nxt in _PERCENT_WORDS or nxt == "off":
        return "percent"
    if nxt in DURATION_UNITS or (nxt == "business" and after in DURATION_UNITS):
        return "duration"
    if number.minutes is not None or nxt in TIME_WORDS or (nxt == "in" and after == "the"):
        return "time"
    if hours_context and (prev in {"at", "until", "till", "til", "from", "to", "by"} or nxt in _RANGE_WORDS):
        return "time"
    if prev == "at" and number.value <= 12 and number.value == int(number.value) and len(number.groups) < 2:
        return "time"  # "Wednesday at 8": no price is said as "at eight"
    return "plain"


def find_amounts(tokens: list[Token], *, price_context: bool) -> list[Amount]:
    """Money amounts in a sentence, ranges joined ("between 100 and 150"); bare numbers count with ``price_context``."""
    words = {t.word for t in tokens}
    hours_context = bool(words & _HOURS_CUES) and not bool(words & {"cost", "costs", "price", "$"})
    found: list[tuple[int, float, str | None]] = []
    alternatives: dict[int, float] = {}
    for i, token in enumerate(tokens):
        if token.number is None:
            continue
        kind = _kind(tokens, i, hours_context)
        prev, nxt = _word(tokens, i - 1), _word(tokens, i + 1)
        if kind == "plain" and token.number.text in {"one", "a"}:
            continue  # "the basic one", "that one": a pronoun, not a price
        if kind == "plain" and prev in {"the", "these", "those", "all"} and token.number.value < 10:
            continue  # "the two come to...": a count of things, not a price
        if kind == "plain" and price_context and not hours_context:
            kind = "money"
        if kind == "plain" and nxt in _RANGE_WORDS and i + 2 < len(tokens) and tokens[i + 2].number:
            kind = _kind(tokens, i + 2, hours_context)
        if kind != "money":
            continue
        currency = _CURRENCY_BEFORE.get(prev) or _CURRENCY_AFTER.get(nxt)
        value, groups = token.number.value, token.number.groups
        if len(groups) == 2 and not token.number.digits:  # "twelve ninety-nine": 1299 or 12.99
            alternatives[i] = groups[0] + groups[1] / 100
        if nxt == "cents":
            if found and i >= 2 and prev == "and":
                start, low, cur = found[-1]
                found[-1] = (start, low + value / 100, cur)
                continue
            value, currency = value / 100, "USD"
        found.append((i, value, currency))
    amounts: list[Amount] = []
    for index, (position, value, currency) in enumerate(found):
        if amounts and amounts[-1].high is None:
            between = [t.word for t in tokens[found[index - 1][0] + 1 : position]]
            between = [w for w in between if w not in _CURRENCY_AFTER and w not in _CURRENCY_BEFORE]
            if len(between) == 1 and between[0] in _RANGE_WORDS:
                # "between 100 and 150 euros": a currency said at either end applies to both.
                last = amounts[-1]
                amounts[-1] = Amount(last.value, currency or last.currency, value, last.position)
                continue
        amounts.append(Amount(value, currency or "USD", None, position, alternatives.get(position)))
    return amounts


def find_services(tokens: list[Token], constraints: ConstraintList) -> list[tuple[int, PriceItem]]:
    """Services named in a sentence (by name, alias, or a word no other service uses), with the mention's position."""
    stems = [stem(t.word) for t in tokens]
    mentions: list[tuple[int, int, PriceItem]] = []
    for item, names, distinctive in _service_index(constraints.price_list):
        best: tuple[int, int] | None = None
        for parts in names:
            for start in range(len(stems) - len(parts) + 1):
                if stems[start : start + len(parts)] == list(parts) and (best is None or len(parts) > best[1]):
                    best = (start, len(parts))
        if best is None:
            best = next(((i, 1) for i, s in enumerate(stems) if s in distinctive), None)
        if best is not None:
            mentions.append((best[0], best[1], item))
    # Drop a mention covered by a longer one ("detail" inside "premium detail").
    kept = [(pos, size, item) for pos, size, item in mentions
            if not any(p <= pos and pos + size <= p + s and s > size for p, s, _ in mentions)]
    return [(pos, item) for pos, _, item in sorted(kept, key=lambda m: m[0])]


@functools.lru_cache(maxsize=64)
def _service_index(price_list: tuple[PriceItem, ...]) -> list[tuple[PriceItem, list[tuple[str, ...]], frozenset[str]]]:
    """Per service: its names as stem sequences, and the stems no other service uses."""
    owners: dict[str, set[str]] = {}
    for item in price_list:
        for name in item.names:
            for word in tokenize(name):
                owners.setdefault(stem(word), set()).add(item.id)
    named = [(item, [tuple(stem(w) for w in tokenize(name) if w not in {"a", "the", "of"}) for name in item.names])
             for item in price_list]
    return [(item, names, frozenset(s for parts in names for s in parts if owners.get(s) == {item.id}))
            for item, names in named]


def _pair(amounts: list[Amount], services: list[tuple[int, PriceItem]]) -> list[PriceItem | None]:
    """The service each amount is about: the closest one named before it without an amount yet, else the next one."""
    if not services:
        return [None] * len(amounts)
    taken: set[int] = set()
    paired: list[PriceItem | None] = []
    for amount in amounts:
        before = [i for i, (pos, _) in enumerate(services) if pos < amount.position and i not in taken]
        after = [i for i, (pos, _) in enumerate(services) if pos > amount.position and i not in taken]
        choice = before[-1] if before else after[0] if after else len(services) - 1  # several amounts, one service
        taken.add(choice)
        paired.append(services[choice][1])
    return paired


def _price(kind: VerdictKind, sentence: str, ref: str | None, why: str, confidence: float) -> Verdict:
    return Verdict(kind, sentence, "price", ref, why, confidence)


def check_prices(tokens: list[Token], sentence: str, constraints: ConstraintList, *, context: PriceItem | None = None,
                 asked: tuple[PriceItem, ...] = ()) -> list[Verdict]:
    """Check every amount said in a sentence against the price list and promotions.

    When the sentence names no service, the amounts are about ``context`` (the service the previous sentence named:
    "Premium detail? That one's two forty-nine."), else about ``asked`` (the services the caller's turn named).
    """
    fallback = [context] if context is not None else list(asked)
    services = find_services(tokens, constraints) or [(-1, item) for item in fallback]
    words = {t.word for t in tokens}
    amounts = find_amounts(tokens, price_context=bool(services) or bool(words & _PRICE_CUES))
    named = [item for _, item in services]
    one_total = len(amounts) == 1 and amounts[0].high is None and bool(words & _TOTAL_WORDS)
    if one_total and len(named) >= 2 and len({item.currency for item in named}) == 1:
        total, refs = sum(item.amount for item in named), ",".join(item.id for item in named)
        summed = " + ".join(f"{item.service} {item.amount:g}" for item in named)
        if any(_same(v, total) for v in (amounts[0].value, amounts[0].alternative)):
            return [_price("supported", sentence, refs, f"the total of {summed}", 0.85)]
        why = f"quoted a total of {amounts[0].spoken()}; {summed} is {total:g}"
        return [_price("unsupported", sentence, refs, why, 0.85)]
    pairs = zip(amounts, _pair(amounts, services), strict=True)
    verdicts = [_check_amount(tokens, amount, item, sentence, constraints) for amount, item in pairs]
    return verdicts + _check_percentages(tokens, sentence, constraints)


def _check_amount(tokens: list[Token], amount: Amount, item: PriceItem | None, sentence: str,
                  constraints: ConstraintList) -> Verdict:
    if item is not None:
        listed = Amount(item.amount, item.currency.upper(), item.price_max)
        before = [t.word for t in tokens[max(0, amount.position - 3) : amount.position]
                  if t.word not in _CURRENCY_BEFORE]
        said_under = bool({"under", "below"} & set(before[-2:])) or before[-2:] == ["less", "than"]
        if amount.high is None and listed.currency == amount.currency and said_under:
            # "just under sixty": the listed price must be below the amount, and close to it.
            ok = 0.9 * amount.value <= item.amount < amount.value
            why = f"said under {amount.spoken()}; {item.service} is listed at {item.amount:g}"
            return _price("supported" if ok else "unsupported", sentence, item.id, why, 0.8)
        mismatch = f"quoted {amount.spoken()} but {item.service} is listed at {listed.spoken()}"
        if amount.currency != listed.currency:
            return _price("unsupported", sentence, item.id, mismatch, 0.9)
        if _same(amount.alternative, listed.value) and amount.high is None and listed.high is None:
            amount = Amount(listed.value, amount.currency)
        if _same(amount.value, listed.value) and _same(amount.high, listed.high):
            return _price("supported", sentence, item.id, f"{item.service} is listed at {listed.spoken()}", 0.95)
        if amount.high is None and listed.high is not None and listed.value <= amount.value <= listed.high:
            why = f"{amount.spoken()} is within the listed range {listed.spoken()}"
            return _price("supported", sentence, item.id, why, 0.8)
        return _price("unsupported", sentence, item.id, mismatch, 0.95)
    said = (amount.value, amount.alternative)
    listed_ends = [end for other in constraints.price_list for end in (other.amount, other.price_max)]
    listed_range = amount.high is None or any(_same(amount.high, end) for end in listed_ends)
    for other in constraints.price_list:
        if listed_range and other.currency.upper() == amount.currency and any(_same(v, other.amount) for v in said):
            why = f"{amount.spoken()} is the listed price of {other.service}"
            return _price("supported", sentence, other.id, why, 0.75)
    for promo in constraints.promotions:
        if promo.discount_usd is not None and amount.currency == "USD" and _same(amount.value, promo.discount_usd):
            why = f"{amount.spoken()} off is the {promo.id} promotion"
            return _price("supported", sentence, f"promotions.{promo.id}", why, 0.8)
    said_stems = {stem(w) for w in tokenize(sentence)}  # "a quick detail": the basic and the premium detail
    near = [item for item in constraints.price_list
            if any(stem(w) in said_stems for name in item.names for w in tokenize(name) if len(w) > 3)]
    listed_near = f" ({', '.join(f'{i.service} {i.amount:g}' for i in near)})" if near else ""
    why = f"no listed price or promotion is {amount.spoken()}{listed_near}"
    return _price("unsupported", sentence, ",".join(i.id for i in near) or None, why, 0.85)


def _check_percentages(tokens: list[Token], sentence: str, constraints: ConstraintList) -> list[Verdict]:
    verdicts = []
    for value in [t.number.value for i, t in enumerate(tokens)
                  if t.number is not None and _word(tokens, i + 1) in _PERCENT_WORDS]:
        if (promo := next((p for p in constraints.promotions if _same(value, p.discount_percent)), None)) is None:
            verdicts.append(_price("unsupported", sentence, "promotions", f"no promotion gives {value:g}% off", 0.85))
        else:
            why = f"{value:g}% off is the {promo.id} promotion"
            verdicts.append(_price("supported", sentence, f"promotions.{promo.id}", why, 0.9))
    return verdicts


def _same(a: float | None, b: float | None) -> bool:
    return abs(a - b) < 0.005 if a is not None and b is not None else a is None and b is None
