"""``HistoryCorrector``: after a barge-in, leave in history what the caller heard.

Right after Pipecat's assistant aggregator commits an interrupted reply (whatever reached it, fewer words when
the interruption overtook queued text: Pipecat issue #4996), the reply's assistant text message is rewritten to
the heard prefix of the *generated* text, or removed when none is reliable. Tool messages are never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, InterruptionFrame, LLMContextAssistantTurnFrame, StartFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_harness.history.estimator import HeardPrefix
from pipecat_harness.history.playback import PlaybackTracker, ReplyPlayback
from pipecat_harness.history.text import format_marker, normalized_words

__all__ = ["Correction", "CorrectionPolicy", "HistoryCorrector"]

DecisionCallback = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class CorrectionPolicy:
    """How the corrector rewrites history: the marker and removal fields of ``HistorySettings``."""

    marker: bool = True
    marker_text: str = "[interrupted by the caller here; the rest was not heard]"
    keep_after_removals: int = 2


@dataclass(frozen=True)
class Correction:
    """What the corrector did with one interrupted reply."""

    action: str
    retained_text: str
    heard: HeardPrefix


class HistoryCorrector(FrameProcessor):
    """Rewrites the interrupted reply in the ``LLMContext`` to what the caller heard, per the ``tracker``.

    ``context`` defaults to the preceding ``LLMAssistantAggregator``'s (found at start); ``on_decision`` gets
    ``(action, evidence)`` for every reply handled.
    """

    #: The only frame it acts on besides the lifecycle frames; a placement group passes the rest by it.
    handled_frames: tuple[type[Frame], ...] = (LLMContextAssistantTurnFrame,)

    def __init__(self, tracker: PlaybackTracker, *, context: LLMContext | None = None,
                 policy: CorrectionPolicy | None = None, on_decision: DecisionCallback | None = None,
                 **kwargs: Any) -> None:
        # Direct mode: the aggregator's commit and the InterruptionFrame after it must not be reordered by a queue.
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self.tracker = tracker
        self.context = context
        self.policy = policy or CorrectionPolicy()
        self._on_decision = on_decision
        self._removed: list[list[str]] = []
        self._handled: set[int] = set()
        self.corrections: list[Correction] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Correct history after the aggregator committed an interrupted reply; pass every frame on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame) and self.context is None:
            self.context = self._find_context()
            if self.context is None:
                logger.error(f"{self}: no LLMAssistantAggregator before it and no context= given; "
                             "history will not be corrected")
        elif isinstance(frame, InterruptionFrame):
            self.correct_interrupted()
        await self.inspect_frame(frame, direction)
        await self.push_frame(frame, direction)

    async def inspect_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Take note of the aggregator's commit of a reply (the frame goes on unchanged)."""
        if isinstance(frame, LLMContextAssistantTurnFrame) and direction == FrameDirection.DOWNSTREAM:
            self._on_commit(frame.text)

    def _find_context(self) -> LLMContext | None:
        processor = self.previous
        while processor is not None and not isinstance(processor, LLMAssistantAggregator):
            processor = processor.previous
        return processor.context if processor is not None else None

    def _on_commit(self, text: str) -> None:
        # The aggregator commits a reply once it stopped playing; a newer one may already be playing.
        reply = next((r for r in reversed(self.tracker.replies) if r.state != "playing"), None)
        if reply is None or reply.reply_id in self._handled:
            return
        reply.pipecat_committed = text
        if reply.state == "finished":
            self._handled.add(reply.reply_id)
            self.tracker.complete(reply)
            self._record("played_in_full", reply, None, retained=text)

    def correct_interrupted(self) -> Correction | None:
        """Correct the most recent interrupted reply, once; returns what was done."""
        reply = self.tracker.last
        if self.context is None or reply is None or reply.state != "interrupted" or reply.reply_id in self._handled:
            return None
        self._handled.add(reply.reply_id)
        generated = reply.full_text
        if not generated.strip() and not reply.pipecat_committed:
            return None  # a response with no text (tool calls only): nothing was to be said
        heard = self.tracker.heard_prefix(reply)
        index = self._committed_index(reply)
        if heard.reliable and heard.text.strip():
            truncated = normalized_words(heard.text) != normalized_words(generated)
            content = heard.text.strip()
            if truncated and self.policy.marker:
                content = f"{content} {format_marker(self.policy.marker_text, heard.text, generated)}"
            action = "truncated" if truncated else "retained"
            self._write(index, content)
            return self._finish(action, reply, heard, content)
        words = normalized_words(generated)
        previous = sum(1 for removed in self._removed if _same_reply(removed, words))
        if words and previous >= self.policy.keep_after_removals:
            self._write(index, generated.strip())
            return self._finish("retained", reply, heard, generated.strip(), removed_before=previous)
        self._removed.append(words)
        if index is not None:
            self.context.set_messages([m for i, m in enumerate(self._messages()) if i != index])
        return self._finish("removed", reply, heard, "", removed_before=previous)

    def _finish(self, action: str, reply: ReplyPlayback, heard: HeardPrefix, retained: str, **extra: Any) -> Correction:
        correction = Correction(action=action, retained_text=retained, heard=heard)
        self.corrections.append(correction)
        self._record(action, reply, heard, retained=retained, **extra)
        return correction

    def _messages(self) -> list[Any]:
        return list(self.context.get_messages()) if self.context is not None else []

    def _committed_index(self, reply: ReplyPlayback) -> int | None:
        """Index of the assistant text message Pipecat committed for ``reply``, if any."""
        committed = (reply.pipecat_committed or "").strip()
        for index, message in reversed(list(enumerate(self._messages() if committed else []))):
            role = message.get("role") if isinstance(message, Mapping) else None
            if role == "user":
                return None
            content = message.get("content") if role == "assistant" and not message.get("tool_calls") else None
            if isinstance(content, str) and committed in content:
                return index
        return None

    def _write(self, index: int | None, content: str) -> None:
        if self.context is None:
            return
        if index is None:
            self.context.add_message({"role": "assistant", "content": content})
            return
        # A new message object: others may hold the one Pipecat committed.
        messages = self._messages()
        messages[index] = {**messages[index], "content": content}
        self.context.set_messages(messages)

    def _record(self, action: str, reply: ReplyPlayback, heard: HeardPrefix | None, *, retained: str,
                **extra: Any) -> None:
        if self._on_decision is None:
            return
        generated = reply.full_text
        kept = _strip_marker(retained, self.policy)
        audio = [self.tracker.observer.audio_secs(s.frame_id) for s in reply.segments]
        heard = heard or HeardPrefix(text=retained, method="complete", confidence=1.0)
        evidence: dict[str, Any] = {
            "reply_id": reply.reply_id, "context_id": reply.context_id, "generated_text": generated,
            "heard_text": heard.text, "retained_text": retained, "pipecat_committed_text": reply.pipecat_committed,
            "played_secs": round(reply.played_secs, 3), "written_secs": round(reply.written_secs, 3),
            "audio_secs": round(sum(a for a in audio if a), 3) if any(audio) else None, "receipts": reply.marks_sent,
            "method": heard.method, "confidence": heard.confidence, "reason": heard.reason, "chars_kept": len(kept),
            "chars_removed": max(0, len(generated) - len(kept)), "marker": kept != retained}
        self._on_decision(action, {**evidence, **extra})


def _strip_marker(text: str, policy: CorrectionPolicy) -> str:
    head = policy.marker_text.split("{", 1)[0]
    if policy.marker and head and head in text:
        return text[: text.index(head)].rstrip()
    return text


def _same_reply(a: list[str], b: list[str]) -> bool:
    """Whether two word lists are the same reply (one a prefix of the other, regenerated or cut short)."""
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]
