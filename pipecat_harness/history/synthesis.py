"""``SynthesisObserver``: what the LLM generated and how long the TTS made each sentence.

A sentence's length is final only once its synthesis ended (its sentence text released, the next sentence
announced, or the context stopped); until then the seconds seen are a lower bound.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pipecat.frames.frames import (
    AggregatedTextFrame,
    Frame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService

from pipecat_harness.audio import audio_frame_secs

__all__ = ["SynthesisObserver"]

_MAX_ENTRIES = 512


class SynthesisObserver(BaseObserver):
    """Collects generated text per LLM response and synthesized seconds per TTS sentence."""

    def __init__(self) -> None:
        super().__init__(observe_every_push=False)
        self._generated: OrderedDict[int, list[str]] = OrderedDict()
        self._current_response: int | None = None
        self._audio: OrderedDict[int, float] = OrderedDict()
        self._segment_of_context: dict[str, int] = {}
        self._complete: OrderedDict[int, None] = OrderedDict()
        self.listening = False

    def listen(self, llm: FrameProcessor, tts: FrameProcessor) -> None:
        """Take the frames ``llm`` and ``tts`` push, in the push itself; the worker's events are then ignored."""
        llm.add_event_handler("on_before_push_frame", self._note_llm)
        tts.add_event_handler("on_before_push_frame", self._note_tts)
        self.listening = True

    def generated_text(self, response_frame_id: int) -> str:
        """The text the LLM streamed for the response opened by that ``LLMFullResponseStartFrame``."""
        return "".join(self._generated.get(response_frame_id, []))

    def audio_secs(self, segment_frame_id: int | None) -> float | None:
        """Seconds the TTS synthesized for the sentence that ``AggregatedTextFrame`` announced (``None``: unknown)."""
        return (self._audio.get(segment_frame_id) or None) if segment_frame_id is not None else None

    def synthesis_complete(self, segment_frame_id: int | None) -> bool:
        """Whether the sentence's synthesis ended, so :meth:`audio_secs` is its whole length."""
        return segment_frame_id is not None and segment_frame_id in self._complete

    def note_complete(self, segment_frame_id: int) -> None:
        """Record that a sentence's synthesis ended (used by the observer and by tests)."""
        self._complete[segment_frame_id] = None
        self._trim(self._complete)

    def note_generated(self, response_frame_id: int, text: str) -> None:
        """Record generated text for a response (used by the observer and by tests)."""
        self._generated.setdefault(response_frame_id, []).append(text)
        self._trim(self._generated)

    def note_synthesized(self, segment_frame_id: int, secs: float) -> None:
        """Add synthesized seconds to a sentence (used by the observer and by tests)."""
        self._audio[segment_frame_id] = self._audio.get(segment_frame_id, 0.0) + secs
        self._trim(self._audio)

    async def on_push_frame(self, data: FramePushed) -> None:
        """Note LLM text and TTS sentences and audio as they are produced."""
        if data.direction != FrameDirection.DOWNSTREAM or self.listening:
            return
        if isinstance(data.source, LLMService):
            self._note_llm(data.source, data.frame)
        elif isinstance(data.source, TTSService):
            self._note_tts(data.source, data.frame)

    def _note_llm(self, _llm: FrameProcessor, frame: Frame) -> None:
        # Both only ever go downstream.
        if isinstance(frame, LLMFullResponseStartFrame):
            self._current_response = frame.id
            self._generated[frame.id] = []
            self._trim(self._generated)
        elif isinstance(frame, LLMTextFrame) and self._current_response is not None:
            self.note_generated(self._current_response, frame.text)

    def _note_tts(self, _tts: FrameProcessor, frame: Frame) -> None:
        if isinstance(frame, TTSAudioRawFrame):  # most of what a TTS pushes: checked first
            segment = self._segment_of_context.get(frame.context_id)  # type: ignore[arg-type]
            if segment is not None:
                self.note_synthesized(segment, audio_frame_secs(frame))
        elif isinstance(frame, TTSTextFrame):
            # Sentence-level text is pushed right after the sentence's audio.
            if frame.segment_id is not None and not frame.pts:
                self.note_complete(frame.segment_id)
        elif isinstance(frame, AggregatedTextFrame):
            if frame.context_id is not None:
                previous = self._segment_of_context.get(frame.context_id)
                if previous is not None and previous != frame.id:
                    self.note_complete(previous)
                self._segment_of_context[frame.context_id] = frame.id
                self._audio.setdefault(frame.id, 0.0)
                self._trim(self._segment_of_context)
        elif isinstance(frame, TTSStoppedFrame) and frame.context_id in self._segment_of_context:
            self.note_complete(self._segment_of_context[frame.context_id])

    @staticmethod
    def _trim(entries: dict[Any, Any]) -> None:
        while len(entries) > _MAX_ENTRIES:
            entries.pop(next(iter(entries)))
