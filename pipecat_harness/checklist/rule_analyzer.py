"""A deterministic analyzer: checklist keywords plus the scope of negation.

A negation scopes over the noun phrase after it, up to a preposition or clause boundary: "no incidents" denies
incidents, "no issues with the incident" reports one. Clauses split at commas, "but", "however" and sentence ends.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import NamedTuple

from pipecat_harness.checklist.analysis import Analysis, Analyzer, ItemUpdate, Outcome
from pipecat_harness.checklist.model import Checklist
from pipecat_harness.checklist.progress import ChecklistState, split_key

__all__ = ["RuleAnalyzer"]

_SENTENCE = re.compile(r"[.!?;]+")
_CLAUSE = re.compile(r",|\b(?:but|however|although|though|except)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9']+")

_NEGATIONS = frozenset("no not none nothing never without zero nope nah nor neither".split())
_SCOPE_BREAKERS = frozenset(
    "with about regarding from after during on in at for to since because if when while that which who".split()
)
_RESETS_AFTER_CONJUNCTION = frozenset("a an one the some two three several we they there it i he she".split())
_YES = frozenset("yes yeah yep yup sure correct indeed actually".split())
_POSITIVE_OPENERS = tuple("we had|there was|there were|we did|one|a couple|a few|two|three|just one".split("|"))
_TOPIC_CUES: tuple[str, ...] = ("by the way", "also", "oh and", "another thing", "one more thing", "i should mention")
_TOPIC_CUES += ("i wanted to mention", "separately", "unrelated")
_TOPIC_CUE_PREFIXES = tuple(cue + " " for cue in _TOPIC_CUES)
# A sentence can open with a cue only when its first word opens one: most sentences are not tokenised whole.
_TOPIC_CUE_FIRST_WORDS = frozenset(cue.split()[0] for cue in _TOPIC_CUES)


def _is_negation(word: str) -> bool:
    return word in _NEGATIONS or word.endswith("n't")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def _first_word(text: str) -> str | None:
    first = _WORD.search(text.lower().replace("’", "'"))
    return None if first is None else first.group()


class _Mention(NamedTuple):
    question_id: str
    start: int
    negated: bool


def _word_index(words: list[str]) -> dict[str, list[int]]:
    """Each word of ``words`` with its positions, in order."""
    index: dict[str, list[int]] = {}
    for position, word in enumerate(words):
        index.setdefault(word, []).append(position)
    return index


def _phrase_positions(words: list[str], target: list[str], index: dict[str, list[int]]) -> list[int]:
    """Where the word sequence ``target`` starts in ``words`` (looked up by its first word in ``index``)."""
    starts = index.get(target[0], []) if target else []
    n = len(target)
    return starts if n == 1 else [i for i in starts if words[i : i + n] == target]


@dataclass(frozen=True)
class _Phrases:
    """A checklist's phrases as words, tokenised once per checklist rather than once per clause."""

    topics: list[tuple[list[str], str]]  # (keyword or topic name, question id), longest first
    locations: list[tuple[str, list[list[str]]]]  # (location name, its name and aliases)
    topics_by_first_word: dict[str, list[int]]  # positions in ``topics`` of the phrases each word starts
    location_first_words: frozenset[str]

    @classmethod
    def of(cls, checklist: Checklist) -> _Phrases:
        topics = sorted([(words, q.id) for q in checklist.questions for kw in [*q.keywords, q.topic_name]
                         if (words := _words(kw))], key=lambda item: -len(item[0]))
        locations = [(loc.name, [_words(p) for p in [loc.name, *loc.aliases]]) for loc in checklist.locations]
        by_first = _word_index([phrase[0] for phrase, _ in topics])
        location_first = frozenset(phrase[0] for _, phrases in locations for phrase in phrases if phrase)
        return cls(topics, locations, by_first, location_first)

    def topics_in(self, index: dict[str, list[int]]) -> list[tuple[list[str], str]]:
        """The topic phrases whose first word occurs in a clause (its :func:`_word_index`), longest first."""
        by_first = self.topics_by_first_word
        return [self.topics[p] for p in sorted(p for word in index for p in by_first.get(word, ()))]


_START = operator.itemgetter(1)  # a _Mention's start

# Per checklist, by identity (the checklist kept alongside, so a reused id is not mistaken for it).
_PHRASES: dict[int, tuple[Checklist, _Phrases]] = {}


def _negated_at(words: list[str], position: int) -> bool:
    """Whether a negation cue before ``position`` still scopes over it."""
    for index in range(position - 1, -1, -1):
        word = words[index]
        if _is_negation(word):
            return True
        if word in _SCOPE_BREAKERS:
            return False
        if word in {"and", "or"} and index + 1 < position and words[index + 1] in _RESETS_AFTER_CONJUNCTION:
            return False
    return False


def _polarity(words: list[str]) -> Outcome | None:
    text = " ".join(words)
    if words[0] in _YES or any(text.startswith(opener) for opener in _POSITIVE_OPENERS):
        return "reported"
    if any(_is_negation(word) for word in words[:4]):
        return "denied"
    return None


class RuleAnalyzer(Analyzer):
    """Keyword and negation-scope analyzer; no model, no network, fully deterministic."""

    name = "rules"

    def _phrases_of(self, checklist: Checklist) -> _Phrases:
        cached = _PHRASES.get(id(checklist))
        if cached is None or cached[0] is not checklist:
            if len(_PHRASES) >= 64:
                _PHRASES.clear()
            cached = _PHRASES[id(checklist)] = (checklist, _Phrases.of(checklist))
        return cached[1]

    @staticmethod
    def _mentions(known: _Phrases, words: list[str], index: dict[str, list[int]]) -> list[_Mention]:
        found: dict[str, _Mention] = {}
        taken: set[int] = set()
        # Only phrases that can match are tried, in the same longest-first order as the full list.
        for phrase, question_id in known.topics_in(index):
            for start in _phrase_positions(words, phrase, index):
                span = range(start, start + len(phrase))
                if not taken.isdisjoint(span):
                    continue
                taken.update(span)
                if question_id not in found:
                    found[question_id] = _Mention(question_id, start, _negated_at(words, start))
        return sorted(found.values(), key=_START)

    @staticmethod
    def _locations(known: _Phrases, words: list[str], index: dict[str, list[int]]) -> list[str]:
        if index.keys().isdisjoint(known.location_first_words):
            return []  # most clauses name no place
        hits = []
        for name, phrases in known.locations:
            positions = next(filter(None, (_phrase_positions(words, phrase, index) for phrase in phrases)), None)
            if positions:
                hits.append((positions[0], name))
        return [name for _, name in sorted(hits)]

    async def analyze(self, checklist: Checklist, state: ChecklistState, utterance: str) -> Analysis:
        """Analyse one utterance against the last directive and the checklist keywords."""
        analysis = Analysis(analyzer=self.name)
        known = self._phrases_of(checklist)
        last = state.last_directive or {}
        last_kind = last.get("kind")
        last_targets = [split_key(k) for k in last.get("targets", [])] if last_kind not in ("topic", "closing") else []
        target_ids = {q for q, _ in last_targets}
        addressed = False
        seen: set[tuple[str, str | None]] = set()
        for sentence in _SENTENCE.split(utterance):
            first = _first_word(sentence)
            if first is None:
                continue  # no clause of it has a word to analyse
            sentence_location: str | None = None
            cue = None
            sentence_words: list[str] = []
            if first in _TOPIC_CUE_FIRST_WORDS:
                sentence_words = _words(sentence)
                sentence_text = " ".join(sentence_words)
                if sentence_text.startswith(_TOPIC_CUE_PREFIXES):
                    cue = next(c for c in _TOPIC_CUES if sentence_text.startswith(c + " "))
            if cue is not None and not self._mentions(known, sentence_words, _word_index(sentence_words)):
                cue_pattern = r"^\W*" + r"\W+".join(re.escape(w) for w in cue.split()) + r"\W*"
                topic = re.sub(cue_pattern, "", sentence.strip(), flags=re.IGNORECASE).strip()
                if len(_words(topic)) >= 2:
                    analysis.unexpected_topics.append(topic)
                continue
            for clause in _CLAUSE.split(sentence):
                words = _words(clause)
                if not words:
                    continue
                index = _word_index(words)
                locations = self._locations(known, words, index)
                analysis.locations.extend(name for name in locations if name not in analysis.locations)
                if len(locations) == 1:
                    sentence_location = locations[0]
                location = locations[0] if len(locations) == 1 else (None if locations else sentence_location)
                mentions = self._mentions(known, words, index)
                for mention in mentions:
                    if (mention.question_id, location) in seen:
                        continue
                    seen.add((mention.question_id, location))
                    outcome: Outcome = "denied" if mention.negated else "reported"
                    if outcome == "reported" and last_kind == "follow_up" and mention.question_id in target_ids:
                        outcome = "detail"
                    analysis.updates.append(ItemUpdate(mention.question_id, outcome, location, clause.strip()))
                    addressed = addressed or mention.question_id in target_ids
                if mentions or addressed or not last_targets:
                    continue
                answer: Outcome | None = "detail" if last_kind == "follow_up" else _polarity(words)
                if answer is None:
                    continue
                for question_id, target_location in last_targets:
                    if location and target_location and location != target_location:
                        continue
                    seen.add((question_id, location))
                    seen.add((question_id, None))
                    analysis.updates.append(ItemUpdate(question_id, answer, location or target_location,
                                                       clause.strip()))
                addressed = True
        return analysis
