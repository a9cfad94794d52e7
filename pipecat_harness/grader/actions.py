"""Action claims ("I've updated your address"): true only if a matching operation succeeded on the call's ledger."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pipecat_harness.grader.verdict import Verdict
from pipecat_harness.numbers import stem, tokenize

__all__ = ["InMemoryOperations", "OperationLedgerView", "RecordedOperation", "SucceededOperation", "check_action_claim",
           "find_action_claims"]


@runtime_checkable
class SucceededOperation(Protocol):
    """An operation that completed on a call."""

    @property
    def op_type(self) -> str:
        """Name of the tool that ran (``modify_order_address``), as the tool ledger's records name it."""


@runtime_checkable
class OperationLedgerView(Protocol):
    """Read access to the operations a call executed."""

    async def succeeded_operations(self, call_id: str) -> Sequence[SucceededOperation]:
        """Operations that succeeded on ``call_id``."""


@dataclass(frozen=True)
class RecordedOperation:
    """A succeeded operation (tool name and call)."""

    op_type: str
    call_id: str = ""


class InMemoryOperations:
    """Succeeded operations per call, kept in memory."""

    def __init__(self) -> None:
        self._ops: dict[str, list[RecordedOperation]] = defaultdict(list)

    def record(self, call_id: str, tool_name: str) -> None:
        """Note that ``tool_name`` succeeded on ``call_id``."""
        self._ops[call_id].append(RecordedOperation(tool_name, call_id))

    async def succeeded_operations(self, call_id: str) -> Sequence[SucceededOperation]:
        """Operations that succeeded on ``call_id``."""
        return list(self._ops.get(call_id, []))


_DONE_VERBS = (
    "updated|changed|cancell?ed|booked|scheduled|rescheduled|submitted|processed|issued|sent|refunded|placed|"
    "applied|added|removed|emailed|initiated|moved|modified|corrected|confirmed|returned|approved|credited|"
    "filed|created|started|set up|taken care of|gone through|reserved|saved|texted|messaged|set|switched|swapped|"
    "locked in|gone back|went back|sent back|put through|fixed")
_DONE_RE = re.compile(
    rf"\b(?:i|we)(?:'ve|\s+have|\s+just|\s+went ahead and|\s+already)*\s+(?:just\s+|already\s+)?(?:{_DONE_VERBS})\b"
    rf"|\b(?:is|has been|have been|has|was|were|are|'re|'s been|'s|got)\s+(?:now\s+|already\s+|successfully\s+|all\s+)?"
    rf"(?:{_DONE_VERBS})\b"
    r"|\b(?:you're|you are|that's|it's|we're)\s+all\s+set\b|\b(?:that's|it's|that is|it is)\s+(?:done|been\s+done)\b"
    r"|\ball done\b|^\s*done\b|\b(?:put|got|have) you down\b|\bpenciled you in\b|\bgot you (?:booked|in)\b"
    r"|\b(?:that's|it's|that is|it is)\s+(?:been\s+)?taken care of\b|\bon the calendar\b"
    r"|\b(?:address|email|phone number|number|appointment|booking|plan)\b(?:\s+\w+){0,3}\s+is now\b"
    r"|\bis on (?:its|the) way\b|\bgo(?:es)? through\b|\bwent through\b")
_NOT_DONE_RE = re.compile(
    r"\b(?:will|'ll|can|could|would|going to|once|after|before|if|when|as soon as|should|need to|let me|"
    r"want me to)\b")
_OBJECTS = {"address": "address", "refund": "refund", "refunded": "refund", "return": "return", "returned": "return",
            "appointment": "book", "booking": "book", "booked": "book", "reservation": "book", "reserved": "book",
            "scheduled": "book", "rescheduled": "reschedule", "cancelled": "cancel", "canceled": "cancel",
            "cancellation": "cancel", "exchange": "exchange", "email": "email", "emailed": "email", "phone": "phone",
            "payment": "payment", "credit": "refund", "credited": "refund", "subscription": "subscription",
            "plan": "plan", "password": "password", "texted": "sms", "text": "sms", "confirmation": "confirmation",
            "callback": "callback", "moved": "reschedule", "label": "return", "sent": "send", "switched": "reschedule",
            "swapped": "reschedule"}
#: A plural subject with "are" states a policy ("refunds are issued as store credit"), not something done.
_GENERIC_RE = re.compile(r"^\s*(?:all\s+)?[a-z]+s\s+are\b")
#: Words in tool names that say nothing about which action ran.
_GENERIC = {"order", "pending", "items", "item", "modify", "update", "issue", "get", "details", "user", "find", "by"}


def find_action_claims(utterance: str, caller_utterance: str | None = None) -> list[tuple[str, set[str]]]:
    """Completion claims in an utterance, each with the action keys it names (else the caller's request names)."""
    claims: list[tuple[str, set[str]]] = []
    for sentence in re.split(r"(?<=[.!?])\s+", utterance.strip()):
        if sentence.rstrip().endswith("?"):
            continue
        text = re.sub(r"\b(?:went|gone|go) ahead and ", "", sentence, flags=re.I)
        clauses = map(_words, re.split(r"[,;:]|\band\b|\bbut\b|\bso\b", text, flags=re.I))
        done = [clause for clause in clauses if _claims_completion(clause)]
        if not done:
            continue
        # Each completed clause names its own action ("cancelled, and the refund is on its way": two); a clause that
        # names none ("that's taken care of") takes the sentence's, then the caller's.
        keys = {key for clause in done for key in _keys(clause)} or _keys(_words(sentence))
        keys = keys or (_keys(_words(caller_utterance)) if caller_utterance else keys)
        claims.append((sentence.strip(), keys))
    return claims


def _words(text: str) -> str:
    return re.sub(r" '(ve|s|re|ll|m)\b", r"'\1", " ".join(tokenize(text.replace("’", "'"))))


def _claims_completion(clause: str) -> bool:
    refused = re.search(r"\b(?:not|never|haven't|hasn't|wasn't|couldn't|unable|yet)\b|n't\b", clause)
    return bool(_DONE_RE.search(clause)) and not (_NOT_DONE_RE.search(clause) or _GENERIC_RE.search(clause) or refused)


#: Nouns that name what was acted on, not the action ("your appointment is cancelled" is a cancellation).
_BOOKED_NOUNS = {"appointment", "booking", "reservation"}
_KEY_STEMS = {"cancel", "refund", "reschedul", "return", "address", "book"}
#: Actions a claim can name besides booking.
_OTHER_ACTIONS = {"cancel", "reschedule", "refund", "return", "sms", "email", "callback", "exchange", "address"}


def _keys(text: str) -> set[str]:
    # "sent to your phone", "by email": where it went, not what was done
    text = re.sub(
        r"\b(?:to|on|at|onto) (?:your|the) (?:original )?(?:phone|email|cell|mobile|card|payment method|payment|"
        r"account)\b|\bby (?:email|text|phone)\b", " ", text)
    words = text.split()
    keys = {_normal(_OBJECTS[w]) for w in words if w in _OBJECTS}
    keys |= {_normal(stem(w)) for w in words if stem(w) in _KEY_STEMS}
    booked_by_a_verb = any(w in _OBJECTS and w not in _BOOKED_NOUNS and _normal(_OBJECTS[w]) == "book" for w in words)
    if "book" in keys and keys & _OTHER_ACTIONS and not booked_by_a_verb and "booked" not in words:
        keys.discard("book")
    return keys


def _normal(key: str) -> str:
    return {"reschedul": "reschedule", "schedul": "book", "appointment": "book"}.get(key, key)


def check_action_claim(claim: str, keys: set[str], succeeded: Sequence[SucceededOperation]) -> Verdict:
    """Judge one completion claim against the operations that succeeded on the call."""
    names = [op.op_type for op in succeeded]
    covered: dict[str, str] = {}
    for name in names:
        op_keys = {_normal(stem(part)) for part in name.lower().split("_")} - {stem(g) for g in _GENERIC}
        op_keys |= {_normal(part) for part in name.lower().split("_")} - _GENERIC
        if "book" in op_keys and op_keys & _OTHER_ACTIONS and not {"book", "schedule"} & set(name.split("_")):
            op_keys.discard("book")  # reschedule_appointment moves a booking; it makes none
        if not keys and op_keys:
            return Verdict("supported", claim, "action", f"ledger.{name}", f"{name} succeeded on this call", 0.9)
        for key in keys & op_keys:
            covered.setdefault(key, name)
    if keys and set(covered) >= keys:  # every action the claim names succeeded
        ops = sorted(set(covered.values()))
        refs = ",".join(f"ledger.{n}" for n in ops)
        return Verdict("supported", claim, "action", refs, f"{', '.join(ops)} succeeded on this call", 0.9)
    what, done = ", ".join(sorted(keys)) or "the requested action", ", ".join(names) or "none"
    why = f"claimed {what} was done, but no matching operation succeeded (succeeded: {done})"
    return Verdict("unsupported", claim, "action", "ledger", why, 0.9)
