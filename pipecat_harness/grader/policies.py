"""Policy claims, checked against the tenant's policy statements."""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

from pipecat_harness.grader.conditions import read_conditions, unit_hours, universal, window_claim
from pipecat_harness.grader.constraints import ConstraintList, policy_statement
from pipecat_harness.grader.prices import DURATION_UNITS, find_amounts
from pipecat_harness.grader.verdict import Verdict, VerdictKind
from pipecat_harness.numbers import Token, negated, read_numbers, stem, tokenize

__all__ = ["PolicyFacts", "check_policies"]

_TOPIC_SYNONYMS = {
    "refund": {"refund", "money back", "reimburse", "reimbursement", "cash back"},
    "reschedul": {"reschedul", "move your appointment", "moving your appointment", "change your appointment",
                  "move it to", "move the appointment", "moving the appointment"},
    "cancel": {"cancel", "cancellation"},
    "return": {"return"},
    "pay": {"pay you", "pay at", "pay when", "pay the", "pay after", "pay later", "payment is", "payment due",
            "payment at", "payment when", "collect payment", "payment plan", "financing", "installment", "you'll pay",
            "you'd pay", "pay on", "pay for it", "balance"},
}
#: Policy subjects an agent may state that a tenant's list may not cover.
_POLICY_TOPICS = {"refund", "reschedul", "cancel", "return", "warranty", "guarantee", "deposit", "price match",
                  "financing"}
_PAYMENT_TERMS = {"cash", "card", "credit card", "original payment", "money back", "full refund", "check",
                  "store credit", "gift card"}
#: Payment terms that say a refund is meant even when the sentence does not say "refund".
_TOPIC_NAMING_TERMS = {"cash", "store credit", "gift card", "money back", "full refund"}
#: Ways of saying "the payment method the caller used", read as "original payment".
_ORIGINAL_PAYMENT_RE = re.compile(
    r"\b(?:original (?:card|form of payment|payment method|method of payment)|(?:card|payment method|method|one) "
    r"(?:that )?you (?:originally )?(?:paid with|used|paid)|same card|original payment)\b")
_CARD_WORDS_RE = re.compile(r"\b(?:visa|mastercard|amex|debit card|credit card|bank card)\b")
#: Paying later than the policy says: on a payment plan, after the claim, next month.
_DEFERRED_RE = re.compile(
    r"\b(?:after (?:your|the)\b|later\b|next (?:month|week)|payment plan|financing|installments?|over time|"
    r"monthly|bill you)")
_AT_SERVICE_RE = re.compile(r"\b(?:at|when|during)\b.{0,25}\b(?:visit|service|appointment|come in|arrive)\b")


@dataclass
class PolicyFacts:
    """What a policy statement allows, forbids and limits."""

    name: str
    statement: str
    denied: set[str] = field(default_factory=set)
    only: set[str] = field(default_factory=set)
    free: bool = False
    window_hours: list[float] = field(default_factory=list)
    amounts: list[float] = field(default_factory=list)
    inside_window: bool | None = None

    @classmethod
    def read(cls, name: str, identifier: str) -> PolicyFacts:
        """Read a policy identifier (``no_cash_refunds_store_credit_only``) into facts."""
        statement = policy_statement(identifier)
        facts = cls(name, statement)
        for clause in statement.split(", "):
            words = clause.split()
            if words[0] == "no":
                facts.denied |= {t for t in _PAYMENT_TERMS if t in clause} or {" ".join(words[1:2])}
            if words[-1] == "only":
                facts.only |= {t for t in _PAYMENT_TERMS if t in clause} or {" ".join(words[:-1])}
            facts.free |= "free" in words
            tokens = read_numbers(tokenize(clause))
            facts.window_hours += [t.number.value * unit_hours(n.word) for t, n in itertools.pairwise(tokens)
                                   if t.number is not None and n.word in DURATION_UNITS]
            facts.amounts += [a.value for a in find_amounts(tokens, price_context=True)]
            facts.inside_window = _direction(clause) if facts.window_hours else facts.inside_window
        return facts


_policy_facts = functools.lru_cache(maxsize=256)(PolicyFacts.read)


def _direction(text: str) -> bool | None:
    """Whether a time window means "less notice than" (True) or "at least" (False)."""
    if any(w in text for w in ("under", "within", "less than", "inside", "last minute")):
        return True
    if any(w in text for w in ("up to", "before", "ahead", "at least", "more than", "in advance", "out")):
        return False
    return None


def _negated_near(words: list[str], term: str) -> bool:
    """Whether a negation comes within six words before ``term``."""
    first = term.split()[0]
    return any(word == first and negated(words[max(0, index - 6) : index]) for index, word in enumerate(words))


def _topics(text: str) -> set[str]:
    stems = " ".join(stem(w) for w in text.split())
    found = {topic for topic in _POLICY_TOPICS if topic in stems or topic in text}
    return found | {topic for topic, said in _TOPIC_SYNONYMS.items() if any(s in stems or s in text for s in said)}


def _payment_terms(text: str) -> set[str]:
    """Payment terms said, with the ways of naming the original payment method read as one."""
    original = bool(_ORIGINAL_PAYMENT_RE.search(text))
    text = _CARD_WORDS_RE.sub(" card ", _ORIGINAL_PAYMENT_RE.sub(" ", text))
    terms = {t for t in _PAYMENT_TERMS if re.search(rf"\b{t}\b", text)}
    if "gift card" in terms or "credit card" in terms:
        terms.discard("card")
    if "store credit" in terms:
        terms.discard("credit card")
    return terms | ({"original payment"} if original else set())


def check_policies(tokens: list[Token], sentence: str, constraints: ConstraintList) -> list[Verdict]:
    """Check policy statements (refunds, rescheduling, cancellation...) against the list."""
    words = [t.word for t in tokens]
    text = " ".join(words)
    topics = _topics(text)
    facts = [_policy_facts(name, value) for name, value in constraints.policies.items()]
    covers = {f.name: _topics(f.name.replace("_", " ")) for f in facts}
    if not topics:
        # "Store credit or cash, whichever you prefer": a payment term a policy rules on names its topic.
        said = _payment_terms(text) & _TOPIC_NAMING_TERMS
        topics = {t for f in facts if said & (f.denied | f.only) for t in covers[f.name]}
    if not topics or sentence.rstrip().endswith("?"):
        return []
    policies = {t: next((f for f in facts if t in covers[f.name] or (t == "pay" and "pay" in f.name)), None)
                for t in topics}
    verdicts = (_check_topic(topic, policies[topic], words, text, sentence) for topic in sorted(topics))
    return [v for v in verdicts if v is not None]


def _check_topic(topic: str, policy: PolicyFacts | None, words: list[str], text: str, sentence: str) -> Verdict | None:
    is_negated = negated(words)
    tokens = read_numbers(words)
    conditions = read_conditions(tokens)
    payment = _payment_terms(text)
    open_ended = universal(text)
    fee = bool({"fee", "charge", "penalty", "cost", "costs"} & set(words)) or "$" in words
    deferred = topic == "pay" and bool(_DEFERRED_RE.search(text))
    asserts = bool(conditions or payment or open_ended or fee or deferred or "free" in words)
    if policy is None:
        if topic == "pay" and not deferred:
            return None  # "you'd pay $120 for the shoes" quotes a price, not a payment policy
        if not asserts and not {"lifetime", "guaranteed", "guarantee", "warranty", "deposit", "match"} & set(words):
            return None
        return Verdict("unsupported", sentence, "policy", None, f"the list has no {topic} policy", 0.75)
    ref = f"policies.{policy.name}"
    said = f"policy is '{policy.statement}'"

    def judge(kind: VerdictKind, why: str, confidence: float) -> Verdict:
        return Verdict(kind, sentence, "policy", ref, why, confidence)

    if any(not _negated_near(words, term) for term in payment & policy.denied):
        return judge("unsupported", f"offered {sorted(payment & policy.denied)[0]}; {said}", 0.9)
    if policy.only and any(not _negated_near(words, t) for t in payment - policy.only - policy.denied):
        return judge("unsupported", f"offered {sorted(payment - policy.only)[0]}; {said}", 0.85)
    if topic == "pay" and "time of service" in policy.statement:
        if deferred:
            return judge("unsupported", f"offered to pay later; {said}", 0.8)
        if _AT_SERVICE_RE.search(text) or "time of service" in text:
            return judge("supported", f"consistent with the {said}", 0.8)
    amounts = [a.value for a in find_amounts(tokens, price_context=fee)] if fee else []
    if amounts and policy.amounts and not all(any(abs(a - b) < 0.005 for b in policy.amounts) for a in amounts):
        return judge("unsupported", f"stated a different amount; {said}", 0.9)
    if policy.window_hours and policy.inside_window is not None:
        window = window_claim(conditions, text, policy.statement, policy.window_hours[0], policy.inside_window,
                              policy.free or not policy.amounts)
        if window is not None:
            return judge(window[0], f"{window[1]}; {said}", 0.8)
    elif conditions and not payment:
        return judge("unsupported", f"stated a time limit; {said}", 0.75)
    if amounts and policy.amounts:
        return judge("supported", f"amount matches; {said}", 0.9)
    if open_ended and (policy.window_hours or policy.denied or policy.only):
        return judge("unsupported", f"promised no limit; {said}", 0.85)
    if fee and not is_negated and policy.free:
        return judge("unsupported", f"mentioned a fee; {said}", 0.8)
    if payment or ("free" in words and policy.free) or (fee and is_negated and policy.free):
        return judge("supported", f"consistent with the {said}", 0.85)
    if "free" in words and not policy.free:
        return judge("unsupported", f"said free; {said}", 0.8)
    return None

