"""``HistoryControl``: the history controls as one switchable harness control.

It places a :class:`PlaybackTracker` right after the output transport and a
:class:`HistoryCorrector` right after the assistant aggregator, adds the
tracker's synthesis observer to the worker, and records every assistant reply
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

from pipecat_harness.control import HarnessControl, Placement
from pipecat_harness.history.corrector import CorrectionPolicy, HistoryCorrector
from pipecat_harness.history.playback import PlaybackTracker

if TYPE_CHECKING:
    from pipecat_harness.harness import Harness

__all__ = ["HistoryControl"]


class HistoryControl(HarnessControl):
    """Keeps what the caller heard in history after a barge-in, and tells the model it was cut off."""

    name = "history"

    def __init__(self, harness: Harness) -> None:
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
        """The observer that reports generated text and synthesized sentence lengths."""
        return [self.tracker.observer]

    def _on_decision(self, action: str, evidence: dict[str, Any]) -> None:
        self.record(action, evidence)
