"""What a caller's turn says to a read-back: a confirmation, a decline, or neither.

A confirmation is a turn made only of assent ("yes", "yes please, go ahead",
"that's right, thanks"): every word of it comes from a small vocabulary of
agreement and politeness. Anything else is not one — a question ("yes?",
"okay, so what would that look like?"), a hedge ("yeah I guess"), a
qualification ("yes, but only half"), a change ("yes, make it Friday") or a
"no". Reading strictly costs a confirmed write one more question at worst;
reading leniently runs a write the caller did not agree to.

A decline is a turn that says no to the read-back ("no", "don't", "cancel
that", "I'll keep it"). It closes the proposal.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["ReplyKind", "classify_reply", "is_confirmation", "is_decline"]

ReplyKind = Literal["confirm", "decline", "other"]

# Phrases of assent, and words that may surround them without changing what the turn says.
_ASSENT_PHRASES = (
    "yes", "yeah", "yep", "yup", "yea", "aye", "correct", "right", "sure", "ok", "okay", "alright", "all right",
    "go ahead", "please do", "do it", "do that", "confirm", "confirmed", "i confirm", "absolutely", "exactly",
    "definitely", "of course", "sounds good", "that's right", "that is right", "that's correct",
    "that is correct", "that's it", "that works", "that's fine", "that is fine", "fine", "perfect", "great",
    "book it", "go for it", "uh huh", "mm hmm", "yes it is", "it is", "that's good", "please go ahead",
    "you may", "you can", "proceed", "please proceed",
)
_FILLER = {"please", "thanks", "thank", "you", "so", "much", "very", "oh", "well", "um", "uh", "great", "then",
           "now", "and", "yes"}
_DECLINE = re.compile(
    r"^\W*(no|nope|nah|not|don't|do not|never ?mind|cancel|stop|forget it|i'll keep|i will keep|leave it|"
    r"hold off|not now|no thanks|no thank you)\b"
    r"|\b(don't do|do not do|don't (?:issue|send|book|refund|change|cancel)|cancel (?:it|that|this)|"
    r"i changed my mind|i'll keep it|not (?:right )?now|no longer want)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _assent_only(words: list[str]) -> bool:
    """Whether ``words`` are covered by assent phrases and filler, with at least one assent phrase."""
    i, assented = 0, False
    phrases = sorted((p.split() for p in _ASSENT_PHRASES), key=len, reverse=True)
    while i < len(words):
        for phrase in phrases:
            if words[i:i + len(phrase)] == phrase:
                i += len(phrase)
                assented = True
                break
        else:
            if words[i] not in _FILLER:
                return False
            i += 1
    return assented


def classify_reply(text: str) -> ReplyKind:
    """``confirm``, ``decline`` or ``other`` for one caller turn answering a read-back."""
    stripped = text.strip()
    if not stripped:
        return "other"
    if _DECLINE.search(stripped):
        return "decline"
    if "?" in stripped:
        return "other"
    words = _WORD.findall(stripped.lower().replace("’", "'").replace("-", " "))
    return "confirm" if words and _assent_only(words) else "other"


def is_confirmation(text: str) -> bool:
    """Whether a caller turn is a plain confirmation (assent and nothing else)."""
    return classify_reply(text) == "confirm"


def is_decline(text: str) -> bool:
    """Whether a caller turn declines what was read back."""
    return classify_reply(text) == "decline"
