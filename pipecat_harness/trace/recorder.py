"""``TraceRecorder``: a Pipecat observer writing one JSONL timeline per call.

It records the four records of a call, plus every control decision:

* caller audio events, raw ASR and the submitted user text;
* the messages passed to each model call and the text it generated;
* tool requests, their results and cancellations;
* what was played (released text, seconds of audio) and what the assistant
  aggregator committed to history.

Observers never change frames. Each event is a record of values that do not
change afterwards (text, numbers, and copies of what frames and contexts hold:
messages, tool arguments and results, decisions), handed to a
:class:`~pipecat_harness.trace.writer.TraceWriter`, which encodes and writes it
from its own thread: the loop spends no JSON encoding on the trace and never
waits for the disk.

The model input is logged as a delta, so a trace grows with the call rather
than with its square: each ``model_input`` event carries ``keep``, how many
leading messages of the previous model input the model received again
unchanged, and ``messages``, the ones that follow (the new turn, tool results,
or everything from the first message the history control rewrote). The first
model input of a call, and the next one after :meth:`TraceRecorder.request_full_context`,
carry the whole context (``keep`` 0). ``total`` is the length of the full
context; :meth:`~pipecat_harness.trace.timeline.Timeline.model_context` rebuilds it.
Given the placed pipeline (:meth:`TraceRecorder.listen`, which ``Harness.place``
calls), it is no worker observer at all: it takes the model inputs from the LLM
as it starts on them, the played audio and text from the output transport as it
pushes them, and every other frame from its first push by the transport or a
processor before it (what is pushed after it goes upstream through it, or is
what it played). A worker observer gets every push through its own queue
and task, which cost the loop more than the recording; as a plain observer (of a
pipeline it was not placed in), it records the same from first pushes.

The LLM service's system instruction (``system``) and the tools offered
(``tools``, their JSON schemas) are logged on the first model input and again
only when they change, so a decision point can be replayed with what the model
was given (``pipecat-harness replay``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    ErrorFrame,
    Frame,
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
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_output import BaseOutputTransport

from pipecat_harness.audio import audio_frame_secs
from pipecat_harness.decisions import ControlDecision, DecisionLog
from pipecat_harness.trace.timeline import Timeline, TraceEvent
from pipecat_harness.trace.writer import TraceWriter, encode_record

__all__ = ["TraceRecorder"]

#: The frames recorded from their first push (model inputs and playback are taken apart).
_RECORDED: tuple[type[Frame], ...] = (
    VADUserStartedSpeakingFrame, VADUserStoppedSpeakingFrame, InterimTranscriptionFrame, TranscriptionFrame,
    UserStartedSpeakingFrame, UserStoppedSpeakingFrame, LLMContextUserTurnFrame, LLMFullResponseStartFrame,
    LLMTextFrame, LLMFullResponseEndFrame, FunctionCallInProgressFrame, FunctionCallResultFrame,
    FunctionCallCancelFrame, BotStartedSpeakingFrame, BotStoppedSpeakingFrame, InterruptionFrame,
    LLMContextAssistantTurnFrame, ErrorFrame,
)


_RECORDED_KINDS: dict[type[Frame], bool] = {}


def _recorded(kind: type[Frame]) -> bool:
    """Whether frames of this class are among :data:`_RECORDED` (cached: a push pays one look-up)."""
    hit = _RECORDED_KINDS.get(kind)
    return _RECORDED_KINDS.setdefault(kind, issubclass(kind, _RECORDED)) if hit is None else hit


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return str(value)


#: Values that never change once made: a snapshot may share them.
_IMMUTABLE = (str, int, float, bool, type(None))


def _snapshot(value: Any) -> Any:
    """JSON-shaped data as it is now, which later changes to ``value`` do not reach.

    Dicts and lists are copied and immutable leaves shared, which costs the
    loop less than encoding them (the writer thread encodes the record) and a
    third of ``copy.deepcopy``; any other leaf is taken in its JSON form now.
    """
    if isinstance(value, dict):
        return {key if isinstance(key, str) else str(key): _snapshot(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_snapshot(item) for item in value]
    if isinstance(value, _IMMUTABLE):
        return value
    return _jsonable(value)


def _same_message(current: Any, logged: Any) -> bool:
    """Whether a context message is the one logged before (``logged`` is its JSON form)."""
    return bool(current == logged) or _jsonable(current) == logged


def _clock_secs(processor: FrameProcessor) -> float:
    """The processor's clock, in seconds (the time observers are given for its pushes)."""
    return float(processor.get_clock().get_time()) / 1e9


def _tool_schemas(tools: Any) -> list[dict[str, Any]]:
    """The standard function schemas of a context's ``ToolsSchema`` (none: an empty list)."""
    standard = getattr(tools, "standard_tools", None) or []
    schemas = []
    for schema in standard:
        to_dict = getattr(schema, "to_default_dict", None)
        if callable(to_dict):
            schemas.append(_jsonable(to_dict()))
    return schemas


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
        self._records: list[dict[str, Any]] = []
        self._events: list[TraceEvent] = []
        self._writer = TraceWriter(self.path) if self.path is not None else None
        self._model_input: list[Any] = []
        self._model_system: Any = None
        self._model_tools: Any = None
        self._full_context_next = True
        self._now = 0.0
        self._generated: list[str] | None = None
        # Seconds of audio the transport played in the call, and that sum when the bot last started speaking:
        # frames are noted in the order they were pushed, so a turn's audio is the difference.
        self._played_secs = 0.0
        self._played_at_start = 0.0
        self._bot_speaking = False
        self.listening = False
        self._clock_of: FrameProcessor | None = None
        self._seen: set[int] = set()
        if decisions is not None:
            decisions.add_listener(self._on_decision)
        self.add("call", "call_started", call_id=call_id, **(metadata or {}))

    def add(self, lane: str, kind: str, *, t: float | None = None, **data: Any) -> None:
        """Append an event to the timeline (used by the recorder and by simulators).

        The values in ``data`` must not change afterwards: the event is encoded
        later, off the loop (pass copies of what is still changing).
        """
        record = {"t": round(self._time() if t is None else t, 4), "lane": lane, "kind": kind, **data}
        self._records.append(record)
        if self._writer is not None:
            self._writer.write(record)

    @property
    def events(self) -> list[TraceEvent]:
        """The events recorded so far, in recording order (as read back from the file)."""
        for record in self._records[len(self._events):]:
            self._events.append(TraceEvent.from_mapping(json.loads(encode_record(record))))
        return self._events

    def listen(self, processors: Sequence[FrameProcessor], *, entry: FrameProcessor | None = None) -> bool:
        """Record from the processors' own events instead of as a worker observer.

        Pipecat runs a processor's ``on_before_process_frame`` and
        ``on_before_push_frame`` handlers in the frame's own path; these note
        the frame (a model input is copied, as it is logged anyway) and return.
        Once listening, the recorder is not to be added to the worker's observers.

        Args:
            processors: The pipeline's processors in order, the LLM service and the output transport among them
                (those after the transport are not listened to).
            entry: The processor frames queued into the pipeline reach first, if ``processors`` may pass
                some of them by.

        Returns:
            Whether it listens: ``False`` (observe it instead) without an LLM service and an output transport.
        """
        llm = next((p for p in processors if isinstance(p, LLMService)), None)
        output = next((p for p in processors if isinstance(p, BaseOutputTransport)), None)
        if self.listening or llm is None or output is None:
            return self.listening
        llm.add_event_handler("on_before_process_frame", self._on_llm_frame)
        output.add_event_handler("on_before_push_frame", self._on_output_push)
        for processor in processors[:processors.index(output)]:
            # A TTS service first pushes none of the frames recorded here, only audio and the text spoken.
            if not isinstance(processor, TTSService):
                processor.add_event_handler("on_before_push_frame", self._on_push)
        if entry is not None:
            entry.add_event_handler("on_before_process_frame", self._on_push)
        self._observe_every_push = False
        self.listening = True
        self._clock_of = output
        return True

    def _on_push(self, processor: FrameProcessor, frame: Frame) -> None:
        if not _recorded(type(frame)):
            return
        seen = self._seen
        if frame.id in seen or frame.broadcast_sibling_id in seen:
            return
        seen.add(frame.id)
        self._now = _clock_secs(processor)
        self._record_first_push(frame, processor)

    def _time(self) -> float:
        """Now on the pipeline's clock once it runs; before that, the time of the last push observed."""
        if self._clock_of is not None:
            try:
                return _clock_secs(self._clock_of)
            except Exception:  # not started yet: Pipecat gives a processor its clock at setup
                pass
        return self._now

    def _on_llm_frame(self, llm: FrameProcessor, frame: Frame) -> None:
        if isinstance(frame, LLMContextFrame) and isinstance(llm, LLMService):
            self._add_model_input(frame.context.get_messages(), llm, frame.context, t=_clock_secs(llm))

    def _on_output_push(self, output: FrameProcessor, frame: Frame) -> None:
        # Audio and spoken text leave the transport downstream only.
        if isinstance(frame, OutputAudioRawFrame):
            self._played_secs += audio_frame_secs(frame)
        elif isinstance(frame, TTSTextFrame):
            self.add("bot", "played_text", t=_clock_secs(output), text=frame.text)
        else:
            self._on_push(output, frame)

    def request_full_context(self) -> None:
        """Log the next model input whole rather than as the messages new since the last one."""
        self._full_context_next = True

    def close(self) -> None:
        """Write out everything recorded and close the trace file."""
        if self._writer is not None:
            self._writer.close()

    def timeline(self) -> Timeline:
        """The events recorded so far."""
        return Timeline(self.events)

    def _add_model_input(self, messages: list[Any], llm: LLMService[Any], context: Any, *,
                         t: float | None = None) -> None:
        extra: dict[str, Any] = {}
        system = getattr(llm.settings, "system_instruction", None)
        system = system if isinstance(system, str) else None
        tools = _tool_schemas(getattr(context, "tools", None))
        first = not self._model_input and self._model_system is None and self._model_tools is None
        if first or system != self._model_system:
            extra["system"] = system
            self._model_system = system
        if first or tools != self._model_tools:
            extra["tools"] = tools
            self._model_tools = tools
        previous = self._model_input
        keep = 0
        if not self._full_context_next:
            limit = min(len(previous), len(messages))
            while keep < limit and _same_message(messages[keep], previous[keep]):
                keep += 1
        self._full_context_next = False
        new = [_snapshot(message) for message in messages[keep:]]
        self._model_input = previous[:keep] + new
        self.add("model", "model_input", t=t, keep=keep, total=len(messages), messages=new, **extra)

    def _on_decision(self, kind: str, decision: ControlDecision) -> None:
        # Evidence and outcome are the control's own mappings: copied as they are now.
        self.add("control", "decision" if kind == "decision" else "decision_outcome", t=decision.at,
                 **_snapshot(decision.to_dict()))

    async def on_push_frame(self, data: FramePushed) -> None:
        """Record the frames that make up the four records of a call (not once it listens to the pipeline)."""
        if self.listening:
            return
        frame = data.frame
        self._now = data.timestamp / 1e9
        if isinstance(frame, LLMContextFrame):
            if isinstance(data.destination, LLMService):
                self._add_model_input(frame.context.get_messages(), data.destination, frame.context)
            return
        if isinstance(frame, OutputAudioRawFrame):
            if isinstance(data.source, BaseOutputTransport) and data.direction == FrameDirection.DOWNSTREAM:
                self._played_secs += audio_frame_secs(frame)
            return
        if isinstance(frame, TTSTextFrame):
            if isinstance(data.source, BaseOutputTransport):
                self.add("bot", "played_text", text=frame.text)
            return
        # Broadcast frames travel as one copy per direction: record the downstream one.
        if not data.first_push or data.direction != FrameDirection.DOWNSTREAM:
            return
        if _recorded(type(frame)):
            self._record_first_push(frame, data.source)

    def _record_first_push(self, frame: Frame, source: FrameProcessor) -> None:
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self.add("caller", "speech_started")
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self.add("caller", "speech_stopped", stop_secs=frame.stop_secs)
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
        elif isinstance(frame, LLMFullResponseStartFrame) and isinstance(source, LLMService):
            self._generated = []
        elif isinstance(frame, LLMTextFrame) and isinstance(source, LLMService):
            if self._generated is not None:
                self._generated.append(frame.text)
        elif isinstance(frame, LLMFullResponseEndFrame) and isinstance(source, LLMService):
            text = "".join(self._generated or []).strip()
            if text:
                self.add("model", "generated", text=text)
            self._generated = None
        elif isinstance(frame, FunctionCallInProgressFrame):
            self.add("tool", "tool_request", name=frame.function_name, tool_call_id=frame.tool_call_id,
                     arguments=_snapshot(dict(frame.arguments or {})))
        elif isinstance(frame, FunctionCallResultFrame):
            self.add("tool", "tool_result", name=frame.function_name, tool_call_id=frame.tool_call_id,
                     result=_snapshot(frame.result), error=getattr(frame, "error", None))
        elif isinstance(frame, FunctionCallCancelFrame):
            self.add("tool", "tool_cancelled", name=frame.function_name, tool_call_id=frame.tool_call_id)
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._played_at_start = self._played_secs
            self._bot_speaking = True
            self.add("bot", "bot_started_speaking")
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
            played = self._played_secs - self._played_at_start
            self.add("bot", "bot_stopped_speaking", played_secs=round(played, 3))
        elif isinstance(frame, InterruptionFrame):
            self.add("bot", "interruption", bot_speaking=self._bot_speaking)
        elif isinstance(frame, LLMContextAssistantTurnFrame):
            self.add("bot", "assistant_committed", text=frame.text)
        elif isinstance(frame, ErrorFrame):
            self.add("call", "error", error=str(frame.error))
