"""``SpellingNormalizer``: rewrite ASR spelling artifacts before the user aggregator.

Each rule (see ``SpellingSettings``) rewrites one recurring artifact; text it does not match passes byte for
byte, so "JFK", "4K", "USB-C" and Whisper's readable dash groups ("W-237-8156") are never touched.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import Frame, TranscriptionFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_harness.config.call_blocks import SpellingSettings
from pipecat_harness.input.identifier_formats import IDENTIFIER_CUES

__all__ = ["SpellingNormalizer", "SpellingResult", "SpellingRules", "normalize_spelling"]

_AS_IN_CAMEL = re.compile(r"\b([A-Z])AsIn([A-Z][a-z]+)\b")
_AS_IN_DASHED = re.compile(r"\b([A-Za-z])-as-in-([A-Za-z]+)\b", re.IGNORECASE)
_LETTER_DIGIT = re.compile(r"(?<![\w#@.])([a-z0-9]{5,16})(?![\w@])", re.ASCII)
_UNIT_SUFFIX = re.compile(r"[0-9]+[a-z]+", re.ASCII)  # a number with a unit: "60fps", "1080p", "3rd"
_LETTER_MARK = re.compile(r"(?<=\b[A-Za-z]-)([A-Za-z])['’]d(?=-[A-Za-z]\b)", re.ASCII)
_DOTTED = re.compile(r"\b(?:[A-Za-z][.\-]){3,}[A-Za-z]\b\.?", re.ASCII)
_SPLIT_UNDERSCORE = re.compile(r"\b(under) (score)\b", re.IGNORECASE)
#: A number reading ("8.9", "8,066") that ends the phrase (an identifier, not "2.5 times").
_NUMBER_READING = re.compile(r"(?<![0-9.,])(?P<number>[0-9]{1,2}\.[0-9]{1,2}|[0-9]{1,3}(?:,[0-9]{3})+)"
                             r"(?![0-9]|\.[0-9]|,[0-9])(?=[.,;!?]*(?:\s+[0-9]|\s*$))", re.ASCII)
_CUE_WORDS = 4

#: Which rewrites are on: the ``spelling`` settings block itself (``enabled`` is the control's switch).
SpellingRules = SpellingSettings


@dataclass(frozen=True)
class SpellingResult:
    """The text after the rewrites and which rules changed it."""

    before: str
    after: str
    rules: tuple[str, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> bool:
        """Whether any rule rewrote the text."""
        return self.before != self.after


def _letter_digit(match: re.Match[str]) -> str:
    token = match.group(1)
    letters, digits = sum(c.isalpha() for c in token), sum(c.isdigit() for c in token)
    return token.upper() if 1 <= letters <= 3 and digits >= 2 and not _UNIT_SUFFIX.fullmatch(token) else token


def _number_readings(text: str) -> str:
    def rewrite(match: re.Match[str]) -> str:
        before = re.findall(r"[A-Za-z#'-]+", text[: match.start()])[-_CUE_WORDS:]
        if not any(word.lower() in IDENTIFIER_CUES for word in before):
            return match.group(0)
        number = match.group("number")
        return number.replace(",", "") if "," in number else number.replace(".", " ")

    return _NUMBER_READING.sub(rewrite, text)


def normalize_spelling(text: str, rules: SpellingRules | None = None) -> SpellingResult:
    """Apply the enabled rewrites (all by default) to one transcript."""
    rules = rules or SpellingRules()
    applied: list[str] = []
    after = text
    steps: list[tuple[str, bool, Callable[[str], str]]] = [
        ("as_in", rules.as_in, lambda t: _AS_IN_DASHED.sub(r"\1 as in \2", _AS_IN_CAMEL.sub(r"\1 as in \2", t))),
        ("spelled_letter_marks", rules.spelled_letter_marks, lambda t: _LETTER_MARK.sub(r"\1", t)),
        ("dotted_letters", rules.dotted_letters, lambda t: _DOTTED.sub(
            lambda m: " ".join(re.findall(r"[A-Za-z]", m.group(0))).upper(), t)),
        ("letter_digit_runs", rules.letter_digit_runs, lambda t: _LETTER_DIGIT.sub(_letter_digit, t)),
        ("split_connectors", rules.split_connectors, lambda t: _SPLIT_UNDERSCORE.sub("underscore", t)),
        ("number_readings", rules.number_readings, _number_readings),
    ]
    for name, enabled, rewrite in steps:
        rewritten = rewrite(after) if enabled else after
        if rewritten != after:
            applied.append(name)
            after = rewritten
    return SpellingResult(before=text, after=after, rules=tuple(applied))


class SpellingNormalizer(FrameProcessor):
    """Rewrites final transcripts between STT and the user aggregator; interim transcripts pass unchanged.

    ``rules`` says which rewrites are on; ``on_rewrite`` gets ``("rewritten", evidence)`` for each rewrite.
    """

    #: The only frame it acts on, besides the lifecycle frames.
    handled_frames: tuple[type[Frame], ...] = (TranscriptionFrame,)

    def __init__(self, rules: SpellingRules | None = None, *,
                 on_rewrite: Callable[[str, dict[str, Any]], Any] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self.rules = rules or SpellingRules()
        self._on_rewrite = on_rewrite

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Rewrite final transcripts going downstream; forward every frame."""
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame) and direction == FrameDirection.DOWNSTREAM and frame.text:
            result = normalize_spelling(frame.text, self.rules)
            if result.changed:
                # A rewritten copy goes on; the frame the trace recorded as raw ASR keeps what the recogniser said.
                frame = copy.copy(frame)
                frame.text = result.after
                if self._on_rewrite is not None:
                    self._on_rewrite("rewritten",
                                     {"before": result.before, "after": result.after, "rules": list(result.rules)})
        await self.push_frame(frame, direction)
