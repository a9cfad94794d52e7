"""Capability claims: what the agent offers to do, checked against what the tenant can do.

Offered actions, transfers, look-ups, messages and timed callbacks are checked against the ``capabilities``, ``staff``
and ``integrations``; availability is ``out_of_scope``. Reading an offer from words is never certain, so these verdicts
sit below ``SETTLED_CONFIDENCE``: the combined grader asks the model about each.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from pipecat_harness.grader.constraints import ConstraintList, Integration
from pipecat_harness.grader.prices import find_services
from pipecat_harness.grader.verdict import Verdict, VerdictKind
from pipecat_harness.numbers import Token, negated, read_numbers, stem, tokenize

__all__ = ["check_capabilities", "readable_records"]

_OFFER_RE = re.compile(
    r"\b(?P<subject>i|we)(?:\s+can|\s+could|\s+will|'ll|\s+are able to|\s+am able to|'m able to|'re able to|"
    r"'d be happy to|'d be glad to|'d love to|'m going to|\s+am going to|'m|\s+am|\s+would|'d)\s+"
    r"(?:also\s+|definitely\s+|go ahead and\s+|just\s+|quickly\s+|now\s+)?(?P<verb>[a-z]+)"
    r"|\b(?:let me|want me to|like me to|shall i|should i)\s+(?:just\s+|quickly\s+|go ahead and\s+)?(?P<verb2>[a-z]+)"
    r"|\bwe\s+(?:also\s+|do\s+)?(?P<verb3>offer|do|provide|sell|handle)\s+(?P<object>[a-z ]+)")
#: Verbs that offer no business action by themselves (looking things up and handing over are checked apart).
_NEUTRAL_VERBS = {"help", "tell", "explain", "repeat", "take", "confirm", "answer", "walk", "go", "note", "have", "try",
                  "read", "ask", "be", "verify", "make", "assist", "say", "start", "share", "spell", "hold", "wait",
                  "understand", "do", "happy", "glad", "sorry", "afraid", "not", "just", "going", "able", "also",
                  "definitely", "still"}
#: Verbs whose object names the action ("give you a discount").
_OBJECT_VERBS = {"give", "get", "arrange", "set", "offer", "do", "process", "put"}
_LOOKUP_VERBS = {"look", "pull", "check", "find", "see", "access", "review", "bring", "open", "search"}
_TRANSFER_VERBS = {"transfer", "connect", "patch", "put", "forward"}
_MESSAGE_VERBS = {"send", "text", "email", "message", "mail"}
#: Business actions and the capability stems that cover them.
_ACTION_VERBS = {"book": {"book", "schedul", "appointment"}, "schedul": {"book", "schedul", "appointment"},
                 "reschedul": {"reschedul"}, "move": {"reschedul"}, "cancel": {"cancel"}, "refund": {"refund"},
                 "process": {"refund", "process", "return"}, "issu": {"refund"}, "ship": {"ship"},
                 "deliver": {"deliver"}, "waiv": {"waiv"}, "discount": {"discount"}, "upgrad": {"upgrad"},
                 "install": {"install"}, "repair": {"repair"}, "pick": {"pick", "pickup"}, "pickup": {"pick", "pickup"},
                 "quot": {"pric", "quot"}, "pric": {"pric", "quot"}, "order": {"order"},
                 "chang": {"chang", "updat", "modify"}, "invoic": {"email", "invoic"}, "arrang": {"arrang"},
                 "updat": {"updat", "chang", "modify"}, "modify": {"modify", "updat", "chang"},
                 "come": {"mobil", "visit"}, "return": {"return"}}

# -- transfers ---------------------------------------------------------------
_TRANSFER_TARGET_RE = re.compile(
    r"\b(?:transfer|connect|patch|put|forward)\w*\s+(?:you|your call|the call)\s+(?:directly\s+|right\s+|over\s+)?"
    r"(?:through\s+|over\s+|back\s+)?(?:to|with)\s+(?P<target>.+)", re.IGNORECASE)
_ON_THE_LINE_RE = re.compile(r"\bget\s+(?P<target>.+?)\s+on the (?:line|phone)\b", re.IGNORECASE)
#: Who a referral may name without naming anyone in particular.
_REFERRAL_WORDS = {"someone", "somebody", "person", "human", "member", "agent", "representative", "rep", "specialist",
                   "colleague", "manager", "supervisor", "staff", "team", "shop", "office", "people", "associate",
                   "coworker", "technician", "owner", "expert", "one", "else", "who", "that", "can", "help", "with",
                   "a", "an", "the", "our", "of", "us", "from", "in", "at", "on", "this", "right", "now", "directly",
                   "for", "you", "your", "line", "phone", "call", "who'll", "front", "desk", "back"}
_NOT_NAMES = {"i", "i'm", "i'll", "i've", "i'd", "ok", "okay", "monday", "tuesday", "wednesday", "thursday", "friday",
              "saturday", "sunday", "eastern", "central", "pacific", "mountain", "dr", "mr", "mrs", "ms", "am", "pm"}
_TITLES = {"dr", "mr", "mrs", "ms", "doctor"}
_TEAM_WORDS = {"team", "department", "dept", "desk", "office", "line"}
#: A role named in a transfer target ends at these words ("a manager who can help"); the fillers are left out.
_ROLE_END = {"for", "who", "who'll", "that", "right", "now", "so", "and"}
_FILLER = {"a", "an", "the", "our", "your", "one", "of"}

# -- look-ups ------------------------------------------------------------------
#: What booking capabilities let the agent read.
_BOOKING_RECORDS = {"appointment", "booking", "reservation", "availability", "available", "opening", "slot", "schedule",
                    "calendar"}
#: Kinds of record a caller might be told the agent is reading; other words are not checked.
_RECORD_WORDS = _BOOKING_RECORDS | {
    "order", "status", "tracking", "shipment", "address", "account", "profile", "email", "history", "record", "file",
    "chart", "balance", "point", "reward", "loyalty", "statement", "payment", "billing", "invoice", "receipt",
    "transaction", "card", "credit", "claim", "insurance", "coverage", "result", "lab", "prescription", "warranty",
    "stock", "inventory", "vehicle", "membership", "subscription", "refund", "treatment", "accounting", "crm",
    "database", "portal", "warehouse", "detail", "purchase"}
#: Words a look-up may name that stand for the business's systems in general.
_GENERIC_SYSTEM = {"system", "computer", "records", "here", "screen", "our", "end"}
#: What a capability lets the agent read, by a stem of the capability's name.
_IMPLIED_RECORDS = {"book": _BOOKING_RECORDS, "reschedul": _BOOKING_RECORDS,
                    "pric": {"pric", "price", "service", "quote"}, "order": {"order", "status", "purchase"},
                    "refund": {"refund", "payment"}, "return": {"return", "order"}, "address": {"address"}}

# -- messages and callbacks ---------------------------------------------------
_CHANNELS = {"text": "sms", "sms": "sms", "message": "sms", "email": "email", "e": "email", "mail": "email",
             "inbox": "email", "whatsapp": "whatsapp", "fax": "fax", "messag": "sms"}
#: Informal verbs of sending ("shoot you a text", "fire off an email", "pop it in your inbox"): a message
#: only when a channel is named with them.
_INFORMAL_SEND_VERBS = {"shoot", "fire", "drop", "pop", "ping", "get", "have", "forward", "pass", "whatsapp", "fax"}
#: A send already made ("I've emailed you the details"): the channel is checked as for an offer.
_SENT_RE = re.compile(
    r"\b(?:i've|i have|we've|we have|i just|we just|i)\s+(?:just\s+|already\s+)?(?P<verb>sent|emailed|texted|"
    r"messaged|faxed|whatsapped|dropped|shot|fired|popped|pinged|forwarded)\b")
#: A message the caller is told they will receive from the agent ("you'll get a text from us").
_RECEIVE_RE = re.compile(r"\byou(?:'ll| will)\s+(?:get|receive|have)\s+(?P<rest>.*\b(?:from (?:me|us)|we send)\b.*)")
_MESSAGE_OBJECTS = {"code", "coupon", "discount", "promo", "voucher", "confirmation", "confirm", "receipt", "invoice",
                    "link", "reminder", "tracking", "number", "quote", "estimate", "form", "portal", "summary",
                    "detail"}
_CALLBACK_RE = re.compile(
    r"\b(?:call (?:you|you guys) back|call you|give you a call|ring you|callback|call back|reach out to you)\b")
_TIME_RE = re.compile(
    r"\b(?:\d{1,2}(?::\d{2})?\s*(?:am|pm|o'clock)|at \d{1,2}(?::\d{2})?|at (?:one|two|three|four|five|six|seven|"
    r"eight|nine|ten|eleven|twelve|noon)|tomorrow|tonight|today|this (?:morning|afternoon|evening)|"
    r"within (?:the|an|the next) (?:hour|day)|in (?:\d+|a few|an?|ten|fifteen|twenty|thirty) (?:minutes?|hours?)|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|end of (?:the )?day|later today)\b")
_AVAILABILITY_RE = re.compile(
    r"\b(?:we have|we've got|there's|there is|there are|we still have)\s+(?:an?\s+|one\s+|two\s+|some\s+)?"
    r"(?:opening|openings|slot|slots|availability|spot|spots|room)\b|\b(?:fully|all) booked\b|\bin stock\b|"
    r"\bsold out\b|\bavailable (?:at|on|tomorrow|today|this|next)\b")


_CLAUSE_BREAK = r",?\s*\bbut\b|;|\bhowever\b"


def _root(word: str) -> str:
    """``stem`` applied until it settles ("openings" -> "opening" -> "open")."""
    return stem(stem(word))


def _stems(words: Iterable[str]) -> set[str]:
    return {_root(w) for w in words}


def _capability_parts(constraints: ConstraintList) -> dict[str, set[str]]:
    split = {cap: cap.split("_") for cap in constraints.capabilities}
    return {cap: {_root(p) for p in parts} | {stem(p) for p in parts} for cap, parts in split.items()}


def _system_words(integration: Integration) -> list[str]:
    return [w for text in (integration.system, *integration.records) for w in tokenize(text)]


def readable_records(constraints: ConstraintList) -> set[str]:
    """Stems of what the agent can look up: its integrations' systems and records, and what its capabilities use."""
    readable = _stems(w for integration in constraints.integrations for w in _system_words(integration))
    for parts in _capability_parts(constraints).values():
        readable |= parts | _stems(w for part in parts for w in _IMPLIED_RECORDS.get(part, ()))
    readable |= _stems(w for item in constraints.price_list for name in item.names for w in tokenize(name))
    return readable | ({"pric", "service"} if constraints.price_list else set())


def _split(text: str, pattern: str, flags: int = 0) -> list[str]:
    return [c.strip() for c in re.split(pattern, text, flags=flags) if c.strip()]


def _verdict(kind: VerdictKind, sentence: str, ref: str, why: str, confidence: float = 0.8) -> Verdict:
    return Verdict(kind, sentence, "capability", ref, why, confidence)


def _can(sentence: str, cap: str) -> Verdict:
    return _verdict("supported", sentence, f"capabilities.{cap}", f"the agent can {cap}")


def _cannot(sentence: str, constraints: ConstraintList, what: str) -> Verdict:
    capabilities = ", ".join(constraints.capabilities) or "none"
    return _verdict("unsupported", sentence, "capabilities", f"{what}; capabilities are {capabilities}")


def check_capabilities(tokens: list[Token], sentence: str, constraints: ConstraintList, *,
                       policy_claim: bool = False) -> list[Verdict]:
    """Check a sentence's offers; with ``policy_claim`` its "we"-offers describe the policy and are not checked."""
    text = " ".join(t.word for t in tokens)
    if sentence.rstrip().endswith("?") and not re.search(r"\b(?:like me to|want me to|shall i|should i)\b", text):
        return []
    verdicts: list[Verdict] = []
    originals = _split(sentence, _CLAUSE_BREAK, re.IGNORECASE)
    for index, clause in enumerate(_split(text, _CLAUSE_BREAK + r"|,\s*(?:and\s+)?then\b")):
        if not negated(clause.split()):
            original = originals[index] if index < len(originals) else sentence
            verdicts += _check_clause(clause, original, sentence, constraints, policy_claim)
    return verdicts


def _check_clause(clause: str, original: str, sentence: str, constraints: ConstraintList,
                  policy_claim: bool) -> list[Verdict]:
    checks = (_check_callback(clause, sentence, constraints), _check_transfer(original, sentence, constraints))
    verdicts = [v for v in checks if v is not None]
    handled = bool(verdicts)  # a callback or transfer is not also an offer of an action
    sent = _SENT_RE.search(clause) or _RECEIVE_RE.search(clause)
    if sent is not None:
        verb = stem(sent.groupdict().get("verb") or "get")
        rest = clause[sent.start() :].split()[1:]
        message = _check_message(verb, rest, sentence, constraints, channel_only=sent.re is _SENT_RE)
        if message is not None:
            return [*verdicts, message]
    for match in _OFFER_RE.finditer(clause):
        if match.group("verb3"):
            verdict = _check_offered_service(match.group("object"), sentence, constraints)
        elif policy_claim and match.group("subject") == "we":
            continue
        else:
            verb = match.group("verb") or match.group("verb2")
            verdict = _check_offer(verb, clause[match.end() :], sentence, constraints, handled=handled)
        if verdict is not None:
            verdicts.append(verdict)
    if not verdicts and _AVAILABILITY_RE.search(clause):
        why = "availability is not in the constraint list; the rules cannot check it"
        verdicts.append(_verdict("out_of_scope", sentence, "availability", why, 0.5))
    return verdicts


def _check_offer(verb: str, rest: str, sentence: str, constraints: ConstraintList, *, handled: bool) -> Verdict | None:
    verb_stem = stem(verb)
    rest_words = rest.split()
    if verb_stem in _LOOKUP_VERBS or verb in _LOOKUP_VERBS:
        return _check_lookup(rest_words, sentence, constraints)
    informal = verb in _INFORMAL_SEND_VERBS and _channel_of(verb_stem, rest_words[:10]) is not None
    if verb_stem in _MESSAGE_VERBS or verb in _MESSAGE_VERBS or informal:
        return _check_message(verb_stem, rest_words, sentence, constraints)
    if handled or verb_stem in _TRANSFER_VERBS or "callback" in rest_words:
        return None
    if verb in _OBJECT_VERBS and rest_words:  # "give you a discount", "arrange a pickup": the noun names the action
        verb_stem = next((stem(w) for w in rest_words[:4] if stem(w) in _ACTION_VERBS), "")
    if verb in _NEUTRAL_VERBS or verb_stem in _NEUTRAL_VERBS or verb_stem not in _ACTION_VERBS:
        return None
    cap = next((c for c, parts in _capability_parts(constraints).items() if _ACTION_VERBS[verb_stem] & parts), None)
    return _can(sentence, cap) if cap is not None else _cannot(sentence, constraints, f"offered to {verb}")


def _check_offered_service(obj: str, sentence: str, constraints: ConstraintList) -> Verdict | None:
    policy = r"\b(?:payment plan|financing|installments?|warranty|guarantee|price match|money[- ]back|refunds?)"
    if re.search(policy, obj) or re.search(policy, sentence, re.IGNORECASE):
        return None  # a policy, checked as one
    if services := find_services(read_numbers(tokenize(obj)), constraints):
        item = services[0][1]
        return _verdict("supported", sentence, item.id, f"{item.service} is a listed service")
    if not obj.strip() or (obj.split()[0] in {"that", "this", "it", "not", "have", "a"} and len(obj.split()) < 2):
        return None
    why = f"offered '{obj.strip()}', which is not a listed service"
    return _verdict("unsupported", sentence, "price_list", why, 0.75)


def _check_lookup(rest: list[str], sentence: str, constraints: ConstraintList) -> Verdict | None:
    """A look-up names records (and maybe a system); each must be one the agent can read."""
    records = _stems(_RECORD_WORDS)
    named = [w for w in rest[:12] if _root(w) in records]
    if not named:
        return None  # "let me check on that", "let me see what I can do"
    readable = readable_records(constraints)
    if unknown := [w for w in named if _root(w) not in readable and w not in _GENERIC_SYSTEM]:
        systems = ", ".join(i.system for i in constraints.integrations) or "none"
        why = f"offered to look up {' '.join(unknown)}; the agent can read {systems} and what its capabilities use"
        return _verdict("unsupported", sentence, "integrations", why)
    said = _stems(named)
    refs = (f"integrations.{i.id}" for i in constraints.integrations if said & _stems(_system_words(i)))
    return _verdict("supported", sentence, next(refs, "capabilities"), f"the agent can look up {' '.join(named)}")


def _message_capabilities(constraints: ConstraintList) -> list[tuple[str, str | None, set[str]]]:
    """(capability, channel or ``None`` for any, what it sends) of every capability that sends something."""
    found = []
    for cap in constraints.capabilities:
        parts = cap.split("_")
        if {"send", "text", "sms", "email", "notify", "message"} & set(parts):
            channel = next((_CHANNELS[p] for p in parts if p in _CHANNELS), None)
            sends = {stem(p) for p in parts if p not in _CHANNELS and p not in {"send", "notify"}}
            found.append((cap, channel, {"confirmation" if s.startswith("confirm") else s for s in sends}))
    return found


def _channel_of(verb_stem: str, window: list[str]) -> str | None:
    """The channel a send names: its verb ("text", "email") or a channel word near it ("emailed", "inbox")."""
    near = (_CHANNELS.get(w) or _CHANNELS.get(stem(w)) for w in window)
    return _CHANNELS.get(verb_stem) or next(filter(None, near), None)


def _check_message(verb_stem: str, rest: list[str], sentence: str, constraints: ConstraintList, *,
                   channel_only: bool = False) -> Verdict | None:
    """A send against the send capabilities: the same channel, and the same kind of message unless ``channel_only``."""
    window = rest[:10]
    channel = _channel_of(verb_stem, window)
    objects = {stem(w) for w in window if stem(w) in _MESSAGE_OBJECTS or w in _MESSAGE_OBJECTS}
    objects = {"confirmation" if o in {"confirm", "confirmat"} else o for o in objects}
    if channel is None and not objects:
        return None  # "I'll send someone out" is not a message
    for cap, cap_channel, cap_objects in _message_capabilities(constraints):
        if (channel is None or cap_channel in (None, channel)) and (channel_only or objects <= cap_objects):
            return _can(sentence, cap)
    by = f" by {channel}" if channel else ""
    return _cannot(sentence, constraints, f"offered to send {' '.join(sorted(objects)) or 'a message'}{by}")


def _check_callback(clause: str, sentence: str, constraints: ConstraintList) -> Verdict | None:
    if not _CALLBACK_RE.search(clause) or not _TIME_RE.search(clause):
        return None  # "let me have someone call you back" is a referral
    cap = next((c for c in constraints.capabilities if "callback" in c or ("call" in c and "back" in c)), None)
    return _can(sentence, cap) if cap is not None else _cannot(sentence, constraints, "promised a callback at a time")


def _names(target: str) -> list[str]:
    """Proper names in a transfer target, titles kept with the name ("Dr Patel")."""
    names = []
    words = re.findall(r"[A-Za-z][A-Za-z'.]*", target)
    for index, word in enumerate(words[:8]):
        bare = re.sub(r"'s$", "", word).rstrip(".")
        if bare[:1].isupper() and bare.lower() not in _NOT_NAMES and len(bare) > 1:
            title = words[index - 1].rstrip(".").lower() if index else ""
            names.append(f"{title} {bare.lower()}" if title in _TITLES else bare.lower())
    return names


def _check_transfer(original: str, sentence: str, constraints: ConstraintList) -> Verdict | None:
    match = _TRANSFER_TARGET_RE.search(original) or _ON_THE_LINE_RE.search(original)
    if match is None:
        return None
    names = _names(match.group("target"))
    words = [re.sub(r"'s$", "", w) for w in tokenize(match.group("target"))[:8]]
    pairs = itertools.pairwise(words)
    team = next((f"{a} {b}" for a, b in pairs if b in _TEAM_WORDS and a not in _REFERRAL_WORDS), None)
    can_transfer = next((c for c in constraints.capabilities if "transfer" in c or "connect" in c), None)
    if not names and team is None:
        role = " ".join(w for w in itertools.takewhile(lambda w: w not in _ROLE_END, words[:5]) if w not in _FILLER)
        staff = next((s for s in constraints.staff if role and s.role and s.role.lower() in role), None)
        if can_transfer and staff is not None:
            why = f"calls can be transferred to the {staff.role} ({staff.name})"
            return _verdict("supported", sentence, f"staff.{staff.id}", why)
        return None  # a referral to "someone" or "a manager" names nobody
    said = names[0] if names else team or ""
    if can_transfer is None:
        why = f"offered a transfer to {said}; the agent has no transfer capability"
        return _verdict("unsupported", sentence, "capabilities", why)
    for member in constraints.staff:
        name = member.name.lower().replace(".", "")
        known = {name, *name.split()} - _TITLES
        by_role = said in member.name.lower() or said.split()[0] in member.role.lower()
        if all(n in known or n.split()[-1] in known for n in names) if names else by_role:
            return _verdict("supported", sentence, f"staff.{member.id}", f"calls can be transferred to {member.name}")
    listed = ", ".join(s.name for s in constraints.staff) or "nobody"
    why = f"offered a transfer to {said}, who is not on the staff list ({listed})"
    return _verdict("unsupported", sentence, "staff", why)
