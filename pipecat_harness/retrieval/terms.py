"""Query terms: the words of a question that both the lexical search and the cache key read, and its query class."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "query_class", "query_terms"]

_WORD = re.compile(r"[0-9A-Za-zÀ-ÖØ-öø-ÿ]+")

#: Function words that carry no evidence about which policy is meant.
STOPWORDS = frozenset("""a an and are as at be been but by can could did do does for from had has have how i if in into
    is it its me my of on or our please should so than that the their them then there these they this to was we were
    what when where which who why will with would you your yours am just about can't cannot im i'm want wanted get got
    tell know like hi hello okay ok yes no""".split())


def query_terms(text: str, *, limit: int = 24) -> list[str]:
    """Lower-cased content words of ``text`` in order of first appearance (at most ``limit``)."""
    words = (match.group(0).lower() for match in _WORD.finditer(text))
    return list(dict.fromkeys(word for word in words if word not in STOPWORDS))[:limit]


def query_class(text: str, *, limit: int = 24) -> str:
    """A question's class for caching: its content words, crudely stemmed and sorted ("damaged items return")."""
    return " ".join(sorted({_stem(w) for w in query_terms(text, limit=limit)}))


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word
