"""``TraceRecorder``: a Pipecat observer writing one JSONL timeline per call.

It records the four records of a call, plus every control decision:

* caller audio events, raw ASR and the submitted user text;
* the messages passed to each model call and the text it generated;
* tool requests, their results and cancellations;
* what was played (released text, seconds of audio) and what the assistant
  aggregator committed to history.

Observers never change frames. Events are kept in memory and appended to a
buffered file, so the recorder does no blocking work per frame beyond a
buffered write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    ErrorFrame,
    FunctionCallCancelFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMContextAssistantTurnFrame,
    LLMContextFrame,
    LLMContextUserTurnFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    TranscriptionFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.transports.base_output import BaseOutputTransport

from pipecat_harness.decisions import ControlDecision, DecisionLog
from pipecat_harness.trace.timeline import Timeline, TraceEvent

__all__ = ["TraceRecorder"]


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


class TraceRecorder(BaseObserver):
    """Record a call's timeline.

    Args:
        path: JSONL file to write (``None`` keeps events in memory only).
        call_id: Identifier of the call, written in the header.
        decisions: The call's decision log; its decisions are put on the timeline.
        metadata: Extra header fields (scenario name, configuration summary...).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        call_id: str = "",
        decisions: DecisionLog | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.path = Path(path) if path else None
        self.call_id = call_id
        self.events: list[TraceEvent] = []
        self._file: IO[str] | None = None
        self._now = 0.0
        self._generated: list[str] | None = None
        self._played_secs = 0.0
        self._bot_speaking = False
        if decisions is not None:
            decisions.add_listener(self._on_decision)
        self.add("call", "call_started", call_id=call_id, **(metadata or {}))

    def add(self, lane: str, kind: str, *, t: float | None = None, **data: Any) -> TraceEvent:
        """Append an event to the timeline (used by the recorder and by simulators)."""
        event = TraceEvent(t=self._now if t is None else t, lane=lane, kind=kind, data=_jsonable(data))
        self.events.append(event)
        if self.path is not None:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("w", encoding="utf-8")
            self._file.write(event.to_json() + "\n")
        return event

    def close(self) -> None:
        """Flush and close the trace file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def timeline(self) -> Timeline:
        """The events recorded so far."""
        return Timeline(self.events)

    def _on_decision(self, kind: str, decision: ControlDecision) -> None:
        self.add("control", "decision" if kind == "decision" else "decision_outcome", t=decision.at,
                 **decision.to_dict())

    async def on_push_frame(self, data: FramePushed) -> None:
        """Record the frames that make up the four records of a call."""
        frame = data.frame
        self._now = data.timestamp / 1e9
        if isinstance(frame, LLMContextFrame):
            if isinstance(data.destination, LLMService):
                self.add("model", "model_input", messages=list(frame.context.get_messages()))
            return
        if isinstance(frame, OutputAudioRawFrame):
            if isinstance(data.source, BaseOutputTransport) and data.direction == FrameDirection.DOWNSTREAM:
                self._played_secs += len(frame.audio) / (frame.sample_rate * frame.num_channels * 2)
            return
        if isinstance(frame, TTSTextFrame):
            if isinstance(data.source, BaseOutputTransport):
                self.add("bot", "played_text", text=frame.text)
            return
        # Broadcast frames travel as one copy per direction: record the downstream one.
        if not data.first_push or data.direction != FrameDirection.DOWNSTREAM:
            return
        self._record_first_push(data)

    def _record_first_push(self, data: FramePushed) -> None:
        frame = data.frame
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self.add("caller", "speech_started")
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self.add("caller", "speech_stopped")
        elif isinstance(frame, InterimTranscriptionFrame):
            self.add("caller", "asr_interim", text=frame.text)
        elif isinstance(frame, TranscriptionFrame):
            self.add("caller", "asr_final", text=frame.text)
        elif isinstance(frame, UserStartedSpeakingFrame):
            self.add("caller", "user_turn_started")
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self.add("caller", "user_turn_stopped")
        elif isinstance(frame, LLMContextUserTurnFrame):
            self.add("caller", "submitted", text=frame.text)
        elif isinstance(frame, LLMFullResponseStartFrame) and isinstance(data.source, LLMService):
            self._generated = []
        elif isinstance(frame, LLMTextFrame) and isinstance(data.source, LLMService):
            if self._generated is not None:
                self._generated.append(frame.text)
        elif isinstance(frame, LLMFullResponseEndFrame) and isinstance(data.source, LLMService):
            text = "".join(self._generated or []).strip()
            if text:
                self.add("model", "generated", text=text)
            self._generated = None
        elif isinstance(frame, FunctionCallInProgressFrame):
            self.add("tool", "tool_request", name=frame.function_name, tool_call_id=frame.tool_call_id,
                     arguments=dict(frame.arguments or {}))
        elif isinstance(frame, FunctionCallResultFrame):
            self.add("tool", "tool_result", name=frame.function_name, tool_call_id=frame.tool_call_id,
                     result=frame.result, error=getattr(frame, "error", None))
        elif isinstance(frame, FunctionCallCancelFrame):
            self.add("tool", "tool_cancelled", name=frame.function_name, tool_call_id=frame.tool_call_id)
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._played_secs = 0.0
            self._bot_speaking = True
            self.add("bot", "bot_started_speaking")
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
            self.add("bot", "bot_stopped_speaking", played_secs=round(self._played_secs, 3))
        elif isinstance(frame, InterruptionFrame):
            self.add("bot", "interruption", bot_speaking=self._bot_speaking)
        elif isinstance(frame, LLMContextAssistantTurnFrame):
            self.add("bot", "assistant_committed", text=frame.text)
        elif isinstance(frame, ErrorFrame):
            self.add("call", "error", error=str(frame.error))
