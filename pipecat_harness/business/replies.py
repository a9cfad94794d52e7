"""What a caller's turn says to a read-back: a confirmation, a decline, or neither.

A confirmation is assent and nothing else ("yes please, go ahead"); a question, a hedge, "yes, but…", a change or a
"no" is not one: reading strictly costs a write one more question, reading leniently runs one the caller did not
agree to. A decline ("no", "cancel that", "I'll keep it") closes the proposal.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["ReplyKind", "classify_reply", "is_confirmation", "is_decline"]

ReplyKind = Literal["confirm", "decline", "other"]

# Phrases of assent, and words that may surround them without changing what the turn says.
_ASSENT_PHRASES = tuple(phrase.strip() for phrase in """yes|yeah|yep|yup|yea|aye|correct|right|sure|ok|okay|alright|
    all right|go ahead|please do|do it|do that|confirm|confirmed|i confirm|absolutely|exactly|definitely|of course|
    sounds good|that's right|that is right|that's correct|that is correct|that's it|that works|that's fine|that is fine|
    fine|perfect|great|book it|go for it|uh huh|mm hmm|yes it is|it is|that's good|please go ahead|you may|you can|
    proceed|please proceed""".split("|"))
_PHRASE_WORDS = sorted((p.split() for p in _ASSENT_PHRASES), key=len, reverse=True)  # longest first
_FILLER = frozenset("please thanks thank you so much very oh well um uh great then now and yes".split())
_DECLINE = re.compile(r"^\W*(no|nope|nah|not|don't|do not|never ?mind|cancel|stop|forget it|i'll keep|i will keep|"
                      r"leave it|hold off|not now|no thanks|no thank you)\b"
                      r"|\b(don't do|do not do|don't (?:issue|send|book|refund|change|cancel)|cancel (?:it|that|this)|"
                      r"i changed my mind|i'll keep it|not (?:right )?now|no longer want)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _assent_only(words: list[str]) -> bool:
    """Whether ``words`` are covered by assent phrases and filler, with at least one assent phrase."""
    i, assented = 0, False
    while i < len(words):
        for phrase in _PHRASE_WORDS:
            if words[i : i + len(phrase)] == phrase:
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
