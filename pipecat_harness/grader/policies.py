"""Policy and capability claims, checked against policy statements and the capability list."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from pipecat_harness.grader.constraints import ConstraintList, policy_statement
from pipecat_harness.grader.numbers import Token, negated, read_numbers, stem, tokenize
from pipecat_harness.grader.prices import DURATION_UNITS, find_amounts, find_services
from pipecat_harness.grader.verdict import Verdict

__all__ = ["PolicyFacts", "check_capabilities", "check_policies"]

_TOPIC_SYNONYMS = {
    "refund": {"refund", "money back", "reimburse", "reimbursement"},
    "reschedul": {
        "reschedul",
        "move your appointment",
        "moving your appointment",
        "change your appointment",
        "move it to",
        "move the appointment",
        "moving the appointment",
    },
    "cancel": {"cancel", "cancellation"},
    "return": {"return"},
}
#: Policy subjects an agent may state that a tenant's list may not cover.
_POLICY_TOPICS = {"refund", "reschedul", "cancel", "return", "warranty", "guarantee", "deposit", "price match"}
_PAYMENT_TERMS = {
    "cash",
    "card",
    "credit card",
    "original payment",
    "money back",
    "full refund",
    "check",
    "store credit",
}
_OPEN_ENDED = {"anytime", "any time", "no questions asked", "whenever", "no matter when"}
_UNIT_NORMAL = {
    "h": "hours",
    "hr": "hours",
    "hrs": "hours",
    "hour": "hours",
    "day": "days",
    "week": "weeks",
    "minute": "minutes",
    "min": "minutes",
    "mins": "minutes",
    "month": "months",
    "year": "years",
}
_HOURS_PER = {"minutes": 1 / 60, "hours": 1.0, "days": 24.0, "weeks": 168.0, "months": 720.0, "years": 8760.0}

_OFFER_RE = re.compile(
    r"\b(?:i|we)(?:\s+can|\s+could|\s+will|'ll|\s+are able to|\s+am able to|'m able to|'re able to)\s+"
    r"(?:also\s+|definitely\s+|go ahead and\s+)?"
    r"(?P<verb>[a-z]+)"
    r"|\b(?:let me|want me to|like me to)\s+(?P<verb2>[a-z]+)"
    r"|\bwe\s+(?:also\s+)?(?P<verb3>offer|do|provide|sell|handle)\s+(?P<object>[a-z ]+)"
)
#: Verbs that offer no business action: looking things up, explaining, handing over to a human.
_NEUTRAL_VERBS = {
    "help", "check", "look", "see", "tell", "explain", "repeat", "transfer", "connect", "put", "take", "get", "find",
    "confirm", "answer", "walk", "go", "give", "pull", "note", "have", "try", "read", "ask", "be", "verify", "make",
    "assist", "say", "start", "share", "spell", "hold", "wait", "understand", "do",
}  # fmt: skip
#: Verbs whose object names the action ("give you a discount").
_OBJECT_VERBS = {"give", "get", "arrange", "set", "offer", "do", "send"}
#: Business actions and the capability stems that cover them.
_ACTION_VERBS = {
    "book": {"book", "schedul", "appointment"}, "schedul": {"book", "schedul", "appointment"},
    "reschedul": {"reschedul"}, "move": {"reschedul"}, "cancel": {"cancel"}, "refund": {"refund"},
    "process": {"refund", "process"}, "issu": {"refund"}, "ship": {"ship"}, "deliver": {"deliver"},
    "send": {"send", "email"}, "email": {"email", "send"}, "text": {"text", "sms"}, "waiv": {"waiv"},
    "discount": {"discount"}, "upgrad": {"upgrad"}, "install": {"install"}, "repair": {"repair"},
    "pick": {"pick", "pickup"}, "pickup": {"pick", "pickup"}, "quot": {"pric", "quot"}, "pric": {"pric", "quot"},
    "order": {"order"}, "chang": {"chang", "updat"}, "invoic": {"email", "invoic"}, "arrang": {"arrang"},
    "updat": {"updat", "chang"}, "come": {"mobil", "visit"},
}  # fmt: skip


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
            facts.window_hours += _durations(tokens)
            facts.amounts += [a.value for a in find_amounts(tokens, price_context=True)]
            facts.inside_window = _direction(clause.split()) if facts.window_hours else facts.inside_window
        return facts


@functools.lru_cache(maxsize=256)
def _policy_facts(name: str, identifier: str) -> PolicyFacts:
    return PolicyFacts.read(name, identifier)


def _durations(tokens: list[Token]) -> list[float]:
    hours = []
    for i, token in enumerate(tokens[:-1]):
        unit = tokens[i + 1].word
        if token.number is not None and unit in DURATION_UNITS:
            hours.append(token.number.value * _HOURS_PER[_UNIT_NORMAL.get(unit, unit)])
    return hours


def _direction(words: list[str]) -> bool | None:
    """Whether a time window means "less notice than" (True) or "at least" (False)."""
    text = " ".join(words)
    if any(w in text for w in ("under", "within", "less than", "inside", "last minute")):
        return True
    if any(w in text for w in ("up to", "before", "ahead", "at least", "more than", "in advance", "out")):
        return False
    return None


def _negated_near(words: list[str], term: str) -> bool:
    """Whether a negation comes within six words before ``term``."""
    first = term.split()[0]
    for index, word in enumerate(words):
        if word == first and negated(words[max(0, index - 6) : index]):
            return True
    return False


def _topics(text: str) -> set[str]:
    stems = " ".join(stem(w) for w in text.split())
    found = {topic for topic in _POLICY_TOPICS if topic in stems or topic in text}
    for topic, synonyms in _TOPIC_SYNONYMS.items():
        if any(s in stems or s in text for s in synonyms):
            found.add(topic)
    return found


def check_policies(tokens: list[Token], sentence: str, constraints: ConstraintList) -> list[Verdict]:
    """Check policy statements (refunds, rescheduling, cancellation...) against the list."""
    words = [t.word for t in tokens]
    text = " ".join(words)
    topics = _topics(text)
    if not topics or sentence.rstrip().endswith("?"):
        return []
    facts = [_policy_facts(name, value) for name, value in constraints.policies.items()]
    verdicts = []
    for topic in sorted(topics):
        policy = next((f for f in facts if topic in _topics(f.name.replace("_", " "))), None)
        verdict = _check_topic(topic, policy, words, text, sentence)
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


def _check_topic(topic: str, policy: PolicyFacts | None, words: list[str], text: str, sentence: str) -> Verdict | None:
    is_negated = negated(words)
    durations = _durations(read_numbers(words))
    payment = {t for t in _PAYMENT_TERMS if re.search(rf"\b{t}\b", text)}
    open_ended = any(p in text for p in _OPEN_ENDED)
    fee = bool({"fee", "charge", "penalty", "cost"} & set(words)) or "$" in words
    asserts = bool(durations or payment or open_ended or fee or "free" in words)
    if policy is None:
        if not asserts and not {"lifetime", "guaranteed", "guarantee", "warranty", "deposit", "match"} & set(words):
            return None
        return Verdict("unsupported", sentence, "policy", None, f"the list has no {topic} policy", 0.75)
    ref = f"policies.{policy.name}"
    said = f"policy is '{policy.statement}'"
    if any(not _negated_near(words, term) for term in payment & policy.denied):
        return Verdict(
            "unsupported", sentence, "policy", ref, f"offered {sorted(payment & policy.denied)[0]}; {said}", 0.9
        )
    if policy.only and any(not _negated_near(words, t) for t in payment - policy.only - policy.denied):
        return Verdict(
            "unsupported", sentence, "policy", ref, f"offered {sorted(payment - policy.only)[0]}; {said}", 0.85
        )
    amounts = [a.value for a in find_amounts(read_numbers(words), price_context=fee)] if fee else []
    if amounts and policy.amounts:
        if all(any(abs(a - b) < 0.005 for b in policy.amounts) for a in amounts):
            return Verdict("supported", sentence, "policy", ref, f"amount matches; {said}", 0.9)
        return Verdict("unsupported", sentence, "policy", ref, f"stated a different amount; {said}", 0.9)
    if durations:
        direction = _direction(words)
        if direction is not None and policy.inside_window is not None and direction != policy.inside_window:
            return Verdict("unsupported", sentence, "policy", ref, f"turned the time window around; {said}", 0.8)
        if any(abs(d - w) < 1e-6 for d in durations for w in policy.window_hours):
            return Verdict("supported", sentence, "policy", ref, f"time window matches; {said}", 0.9)
        return Verdict("unsupported", sentence, "policy", ref, f"stated a different time window; {said}", 0.9)
    if open_ended and (policy.window_hours or policy.denied or policy.only):
        return Verdict("unsupported", sentence, "policy", ref, f"promised no limit; {said}", 0.85)
    if fee and not is_negated and policy.free:
        return Verdict("unsupported", sentence, "policy", ref, f"mentioned a fee; {said}", 0.8)
    if payment or ("free" in words and policy.free) or (fee and is_negated and policy.free):
        return Verdict("supported", sentence, "policy", ref, f"consistent with the {said}", 0.85)
    if "free" in words and not policy.free:
        return Verdict("unsupported", sentence, "policy", ref, f"said free; {said}", 0.8)
    return None


def check_capabilities(tokens: list[Token], sentence: str, constraints: ConstraintList) -> list[Verdict]:
    """Check offers to do something ("I can book that", "we also do tinting") against capabilities and services."""
    words = [t.word for t in tokens]
    text = " ".join(words).replace(" 'll", "'ll")
    if negated(words) or (sentence.rstrip().endswith("?") and "would you like me to" not in text):
        return []
    capability_stems = {stem(part) for cap in constraints.capabilities for part in cap.split("_")}
    verdicts = []
    for match in _OFFER_RE.finditer(text):
        if match.group("verb3"):
            verdict = _check_offered_service(match.group("object"), sentence, constraints)
        else:
            verdict = _check_offered_action(
                match.group("verb") or match.group("verb2"),
                text[match.end() :],
                capability_stems,
                sentence,
                constraints,
            )
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


def _check_offered_action(
    verb: str, rest: str, capability_stems: set[str], sentence: str, constraints: ConstraintList
) -> Verdict | None:
    verb_stem = stem(verb)
    if verb in _OBJECT_VERBS and rest:
        # "give you a discount", "arrange a pickup": the noun names the action.
        verb_stem = next((stem(w) for w in rest.split()[:4] if stem(w) in _ACTION_VERBS), verb_stem)
        verb = verb_stem
    if verb in _NEUTRAL_VERBS or verb_stem in _NEUTRAL_VERBS or verb_stem not in _ACTION_VERBS:
        return None
    covering = _ACTION_VERBS[verb_stem] & capability_stems
    if covering:
        cap = next(c for c in constraints.capabilities if any(stem(p) in covering for p in c.split("_")))
        return Verdict("supported", sentence, "capability", f"capabilities.{cap}", f"the agent can {cap}", 0.85)
    return Verdict(
        "unsupported",
        sentence,
        "capability",
        "capabilities",
        f"offered to {verb}; capabilities are {', '.join(constraints.capabilities) or 'none'}",
        0.85,
    )


def _check_offered_service(obj: str, sentence: str, constraints: ConstraintList) -> Verdict | None:
    tokens = read_numbers(tokenize(obj))
    services = find_services(tokens, constraints)
    if services:
        item = services[0][1]
        return Verdict("supported", sentence, "capability", item.id, f"{item.service} is a listed service", 0.85)
    if not obj.strip() or (obj.split()[0] in {"that", "this", "it", "not", "have", "a"} and len(obj.split()) < 2):
        return None
    return Verdict(
        "unsupported",
        sentence,
        "capability",
        "price_list",
        f"offered '{obj.strip()}', which is not a listed service",
        0.75,
    )
