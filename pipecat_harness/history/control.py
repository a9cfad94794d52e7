"""``HistoryControl``: the playback tracker and the history corrector as one switchable harness control.

A bot with playback receipts wires them here: ``history.tracker.enable_marks(lambda name:
twilio_mark_message(stream_sid, name))``, then ``history.tracker.on_mark_received(twilio_mark_name(message))``.
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
        policy = CorrectionPolicy(settings.marker, settings.marker_text, settings.keep_after_removals)
        self.corrector = HistoryCorrector(self.tracker, policy=policy, on_decision=self._on_decision)

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The tracker after the output transport, the corrector after the assistant aggregator."""
        return [(Placement.AFTER_OUTPUT_TRANSPORT, self.tracker),
                (Placement.AFTER_ASSISTANT_AGGREGATOR, self.corrector)]

    def observers(self) -> list[BaseObserver]:
        """The synthesis observer, unless the placed pipeline's LLM and TTS feed it directly (:meth:`on_pipeline`)."""
        return [] if self.tracker.observer.listening else [self.tracker.observer]

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Feed the synthesis observer from the pipeline's LLM and TTS services, when it has both."""
        llm = next((p for p in processors if isinstance(p, LLMService)), None)
        tts = next((p for p in processors if isinstance(p, TTSService)), None)
        if llm is not None and tts is not None and not self.tracker.observer.listening:
            self.tracker.observer.listen(llm, tts)

    def _on_decision(self, action: str, evidence: dict[str, Any]) -> None:
        decision = self.record(action, evidence)  # the corrector's evidence always carries the three texts
        generated, heard, retained = (str(evidence[key]) for key in ("generated_text", "heard_text", "retained_text"))
        self.harness.events.publish(ReplyDelivered(decision.turn_id, generated, heard, retained,
                                                   full=action == "played_in_full"))
