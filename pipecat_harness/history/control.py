"""``HistoryControl``: the history controls as one switchable harness control.

It places a :class:`PlaybackTracker` right after the output transport and a
:class:`HistoryCorrector` right after the assistant aggregator, has the
tracker's synthesis observer listen to the pipeline's LLM and TTS (or adds it
to the worker, for a pipeline without both), and records every assistant reply
(generated text, played prefix, retained history) as a ``ControlDecision``.

A bot whose transport reports playback receipts wires them here::

    history = harness.control("history")
    history.tracker.enable_marks(lambda name: twilio_mark_message(stream_sid, name))
    ...  # on every incoming Twilio "mark" event:
    history.tracker.on_mark_received(twilio_mark_name(message))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipecat.observers.base_observer import BaseObserver
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService

from pipecat_harness.control import HarnessControl, Placement
from pipecat_harness.events import ReplyDelivered
from pipecat_harness.history.corrector import CorrectionPolicy, HistoryCorrector
from pipecat_harness.history.playback import PlaybackTracker

if TYPE_CHECKING:
    from pipecat_harness.control import ControlHost

__all__ = ["HistoryControl"]


class HistoryControl(HarnessControl):
    """Keeps what the caller heard in history after a barge-in, and tells the model it was cut off."""

    name = "history"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        settings = harness.config.history
        self.tracker = PlaybackTracker(bias=settings.bias, chars_per_sec=settings.chars_per_sec)
        self.corrector = HistoryCorrector(
            self.tracker,
            policy=CorrectionPolicy(
                marker=settings.marker,
                marker_text=settings.marker_text,
                keep_after_removals=settings.keep_after_removals,
            ),
            on_decision=self._on_decision,
        )

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The tracker after the output transport, the corrector after the assistant aggregator."""
        return [
            (Placement.AFTER_OUTPUT_TRANSPORT, self.tracker),
            (Placement.AFTER_ASSISTANT_AGGREGATOR, self.corrector),
        ]

    def observers(self) -> list[BaseObserver]:
        """The observer that reports generated text and synthesized sentence lengths.

        None once the placed pipeline's LLM and TTS feed it directly (see :meth:`on_pipeline`).
        """
        return [] if self.tracker.observer.listening else [self.tracker.observer]

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Feed the synthesis observer from the pipeline's LLM and TTS services, when it has both."""
        llm = next((p for p in processors if isinstance(p, LLMService)), None)
        tts = next((p for p in processors if isinstance(p, TTSService)), None)
        if llm is not None and tts is not None and not self.tracker.observer.listening:
            self.tracker.observer.listen(llm, tts)

    def _on_decision(self, action: str, evidence: dict[str, Any]) -> None:
        decision = self.record(action, evidence)
        if "generated_text" in evidence:
            heard = str(evidence.get("retained_text", evidence.get("heard_text", "")))
            self.harness.events.publish(ReplyDelivered(
                turn_id=decision.turn_id, generated=str(evidence["generated_text"]),
                heard=str(evidence.get("heard_text", heard)), retained=heard, full=action == "played_in_full"))
