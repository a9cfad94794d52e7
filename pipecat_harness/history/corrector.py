"""``HistoryCorrector``: after a barge-in, leave in history what the caller heard.

Pipecat's assistant aggregator commits, on interruption, the text that reached
it: whole played sentences with a TTS that gives no word timestamps (the
sentence being spoken is dropped), played words with one that does, and
fewer when the interruption overtakes text still queued in the aggregator
(Pipecat issue #4996). The corrector sits right after that aggregator and
runs once the commit is done. It rewrites the one assistant text message of
the interrupted reply to the heard prefix of the *generated* text, so it
neither truncates Pipecat's already-truncated text a second time nor loses
words the race dropped:

* a reliable, non-empty heard prefix replaces (or, when Pipecat committed
  nothing, adds) the reply's message, with an optional marker the model can
  see saying it was cut off there;
* no reliable prefix removes the reply's message; a reply removed in full
  ``keep_after_removals`` times is kept the next time, so the model does not
  regenerate it forever;
* tool-call and tool-result messages are never touched: an executed refund
  whose announcement was cut off stays executed.

Uninterrupted replies are left exactly as Pipecat committed them.
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
    """How the corrector rewrites history.

    Parameters:
        marker: Add a marker the model can see where the reply was cut off.
        marker_text: The marker; ``{heard}``, ``{tail}`` and ``{unheard_words}`` are filled in.
        keep_after_removals: After a reply was removed in full this many times, keep it.
    """

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
    """Rewrites the interrupted reply in the ``LLMContext`` to what the caller heard.

    Args:
        tracker: The playback tracker placed after the output transport.
        context: The context to correct; found from the preceding
            ``LLMAssistantAggregator`` at start when omitted.
        policy: Marker and removal rules.
        on_decision: Called with ``(action, evidence)`` for every reply handled.
        **kwargs: Passed to ``FrameProcessor``.
    """

    # Besides the lifecycle frames (start, interruption), the only frame it acts on: a
    # placement group passes audio, text and the bot-speaking heartbeat by it.
    handled_frames: tuple[type[Frame], ...] = (LLMContextAssistantTurnFrame,)

    def __init__(
        self,
        tracker: PlaybackTracker,
        *,
        context: LLMContext | None = None,
        policy: CorrectionPolicy | None = None,
        on_decision: DecisionCallback | None = None,
        **kwargs: Any,
    ) -> None:
        # Direct mode: the aggregator's commit frame and the InterruptionFrame
        # that follows it must be seen in that order, not reordered by a queue.
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
        while processor is not None:
            if isinstance(processor, LLMAssistantAggregator):
                return processor.context
            processor = processor.previous
        return None

    def _on_commit(self, text: str) -> None:
        # The aggregator commits a reply once it stopped playing; a newer reply
        # may already be playing past the tracker, so skip those.
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
        self._remove(index)
        return self._finish("removed", reply, heard, "", removed_before=previous)

    def _finish(self, action: str, reply: ReplyPlayback, heard: HeardPrefix, retained: str,
                **extra: Any) -> Correction:
        correction = Correction(action=action, retained_text=retained, heard=heard)
        self.corrections.append(correction)
        self._record(action, reply, heard, retained=retained, **extra)
        return correction

    # Context edits --------------------------------------------------------------

    def _messages(self) -> list[Any]:
        return list(self.context.get_messages()) if self.context is not None else []

    def _committed_index(self, reply: ReplyPlayback) -> int | None:
        """Index of the assistant text message Pipecat committed for ``reply``, if any."""
        committed = (reply.pipecat_committed or "").strip()
        if not committed or self.context is None:
            return None
        messages = self._messages()
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if not isinstance(message, Mapping):
                continue
            if message.get("role") == "user":
                return None
            if _is_plain_assistant_text(message) and committed in str(message.get("content")):
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

    def _remove(self, index: int | None) -> None:
        if index is None or self.context is None:
            return
        messages = self._messages()
        del messages[index]
        self.context.set_messages(messages)

    # Record ---------------------------------------------------------------------

    def _record(self, action: str, reply: ReplyPlayback, heard: HeardPrefix | None, *, retained: str,
                **extra: Any) -> None:
        if self._on_decision is None:
            return
        generated = reply.full_text
        kept = _strip_marker(retained, self.policy)
        audio = [self.tracker.observer.audio_secs(s.frame_id) for s in reply.segments]
        evidence: dict[str, Any] = {
            "reply_id": reply.reply_id,
            "context_id": reply.context_id,
            "generated_text": generated,
            "heard_text": heard.text if heard is not None else retained,
            "retained_text": retained,
            "pipecat_committed_text": reply.pipecat_committed,
            "played_secs": round(reply.played_secs, 3),
            "written_secs": round(reply.written_secs, 3),
            "audio_secs": round(sum(a for a in audio if a), 3) if any(audio) else None,
            "receipts": reply.marks_sent,
            "method": heard.method if heard is not None else "complete",
            "confidence": heard.confidence if heard is not None else 1.0,
            "reason": heard.reason if heard is not None else "",
            "chars_kept": len(kept),
            "chars_removed": max(0, len(generated) - len(kept)),
            "marker": kept != retained,
            **extra,
        }
        self._on_decision(action, evidence)


def _strip_marker(text: str, policy: CorrectionPolicy) -> str:
    head = policy.marker_text.split("{", 1)[0]
    if policy.marker and head and head in text:
        return text[: text.index(head)].rstrip()
    return text


def _is_plain_assistant_text(message: Mapping[str, Any]) -> bool:
    return (message.get("role") == "assistant" and not message.get("tool_calls")
            and isinstance(message.get("content"), str))


def _same_reply(a: list[str], b: list[str]) -> bool:
    """Whether two word lists are the same reply (one a prefix of the other, regenerated or cut short)."""
    if not a or not b:
        return False
    n = min(len(a), len(b))
    return a[:n] == b[:n]
