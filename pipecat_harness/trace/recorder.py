"""``TraceRecorder``: a Pipecat observer writing one JSONL timeline per call.

It records the four records of a call (caller audio and text, model inputs and output, tools, what was played and
committed) plus every control decision, as copies handed to a :class:`~pipecat_harness.trace.writer.TraceWriter`
that encodes and writes them on its own thread. A ``model_input`` event is a delta (``keep`` leading messages of the
previous input, then ``messages``; the first, and the one after :meth:`TraceRecorder.request_full_context`, is
whole), so a trace grows with the call, not its square; the system instruction and tools are logged when they change.
Placed in the pipeline (:meth:`TraceRecorder.listen`) it records from the processors' own events rather than as a
worker observer, whose queue and task would cost the loop more than the recording.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return str(value)


#: Values that never change once made: a snapshot may share them.
_IMMUTABLE = (str, int, float, bool, type(None))


def _snapshot(value: Any) -> Any:
    """JSON-shaped data as it is now, which later changes to ``value`` do not reach.

    Dicts and lists are copied and immutable leaves shared (cheaper for the loop than encoding, and a third of
    ``copy.deepcopy``); any other leaf is taken in its JSON form now.
    """
    if isinstance(value, dict):
        return {key if isinstance(key, str) else str(key): _snapshot(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_snapshot(item) for item in value]
    return value if isinstance(value, _IMMUTABLE) else _jsonable(value)


def _clock_secs(processor: FrameProcessor) -> float:
    return float(processor.get_clock().get_time()) / 1e9


class TraceRecorder(BaseObserver):
    """Record a call's timeline.

    Args:
        path: JSONL file to write (``None`` keeps events in memory only).
        call_id: Identifier of the call, written in the header.
        decisions: The call's decision log; its decisions are put on the timeline.
        metadata: Extra header fields (scenario name, configuration summary...).
    """

    def __init__(self, path: str | Path | None = None, *, call_id: str = "", decisions: DecisionLog | None = None,
                 metadata: dict[str, Any] | None = None) -> None:
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

        The values in ``data`` must not change afterwards: the event is encoded later, off the loop.
        """
        record = {"t": round(self._time() if t is None else t, 4), "lane": lane, "kind": kind, **data}
        self._records.append(record)
        if self._writer is not None:
            self._writer.write(record)

    @property
    def events(self) -> list[TraceEvent]:
        """The events recorded so far, in recording order (as read back from the file)."""
        for record in self._records[len(self._events) :]:
            self._events.append(TraceEvent.from_mapping(json.loads(encode_record(record))))
        return self._events

    def listen(self, processors: Sequence[FrameProcessor], *, entry: FrameProcessor | None = None) -> bool:
        """Record from the processors' own events (in the frame's path) instead of as a worker observer.

        ``processors`` are the pipeline's in order, with the LLM service and the output transport (those after it are
        not listened to); ``entry`` is where queued frames arrive first if ``processors`` may pass some by. Returns
        whether it listens (``False`` without an LLM and an output transport: observe it instead).
        """
        llm = next((p for p in processors if isinstance(p, LLMService)), None)
        output = next((p for p in processors if isinstance(p, BaseOutputTransport)), None)
        if self.listening or llm is None or output is None:
            return self.listening
        llm.add_event_handler("on_before_process_frame", self._on_llm_frame)
        output.add_event_handler("on_before_push_frame", self._on_output_push)
        for processor in processors[: processors.index(output)]:
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
        record = _recording(type(frame))
        seen = self._seen
        if record is None or frame.id in seen or frame.broadcast_sibling_id in seen:
            return
        seen.add(frame.id)
        self._now = _clock_secs(processor)
        record(self, frame, processor)

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
        standard = getattr(getattr(context, "tools", None), "standard_tools", None) or []
        tools = [_jsonable(s.to_default_dict()) for s in standard if callable(getattr(s, "to_default_dict", None))]
        first = not self._model_input and self._model_system is None and self._model_tools is None
        if first or system != self._model_system:
            extra["system"] = self._model_system = system
        if first or tools != self._model_tools:
            extra["tools"] = self._model_tools = tools
        previous = self._model_input
        keep = 0
        if not self._full_context_next:
            limit = min(len(previous), len(messages))
            # The same message as logged before (``previous`` holds their JSON forms).
            while keep < limit and (bool(messages[keep] == previous[keep])
                                    or _jsonable(messages[keep]) == previous[keep]):
                keep += 1
        self._full_context_next = False
        new = [_snapshot(message) for message in messages[keep:]]
        self._model_input = previous[:keep] + new
        self.add("model", "model_input", t=t, keep=keep, total=len(messages), messages=new, **extra)

    def _on_decision(self, kind: str, decision: ControlDecision) -> None:
        # Evidence and outcome are the control's own mappings: copied as they are now.
        event_kind = "decision" if kind == "decision" else "decision_outcome"
        self.add("control", event_kind, t=decision.at, **_snapshot(decision.to_dict()))

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
        record = _recording(type(frame))
        if record is not None and data.first_push and data.direction == FrameDirection.DOWNSTREAM:
            record(self, frame, data.source)

    def _response(self, frame: Frame, source: FrameProcessor) -> None:
        if not isinstance(source, LLMService):
            return
        if isinstance(frame, LLMFullResponseStartFrame):
            self._generated = []
        elif isinstance(frame, LLMTextFrame):
            if self._generated is not None:
                self._generated.append(frame.text)
        else:
            text = "".join(self._generated or []).strip()
            if text:
                self.add("model", "generated", text=text)
            self._generated = None

    def _tool(self, frame: Any, _source: FrameProcessor) -> None:
        call = {"name": frame.function_name, "tool_call_id": frame.tool_call_id}
        if isinstance(frame, FunctionCallInProgressFrame):
            self.add("tool", "tool_request", **call, arguments=_snapshot(dict(frame.arguments or {})))
        elif isinstance(frame, FunctionCallResultFrame):
            self.add("tool", "tool_result", **call, result=_snapshot(frame.result), error=getattr(frame, "error", None))
        else:
            self.add("tool", "tool_cancelled", **call)

    def _bot_speech(self, frame: Frame, _source: FrameProcessor) -> None:
        self._bot_speaking = isinstance(frame, BotStartedSpeakingFrame)
        if self._bot_speaking:
            self._played_at_start = self._played_secs
            self.add("bot", "bot_started_speaking")
        else:
            self.add("bot", "bot_stopped_speaking", played_secs=round(self._played_secs - self._played_at_start, 3))


_Recording = Callable[[TraceRecorder, Any, FrameProcessor], None]

#: How each frame recorded from its first push is recorded (model inputs and playback are taken apart).
_FIRST_PUSH: dict[type[Frame], _Recording] = {
    VADUserStartedSpeakingFrame: lambda r, f, _: r.add("caller", "speech_started"),
    VADUserStoppedSpeakingFrame: lambda r, f, _: r.add("caller", "speech_stopped", stop_secs=f.stop_secs),
    InterimTranscriptionFrame: lambda r, f, _: r.add("caller", "asr_interim", text=f.text),
    TranscriptionFrame: lambda r, f, _: r.add("caller", "asr_final", text=f.text),
    UserStartedSpeakingFrame: lambda r, f, _: r.add("caller", "user_turn_started"),
    UserStoppedSpeakingFrame: lambda r, f, _: r.add("caller", "user_turn_stopped"),
    LLMContextUserTurnFrame: lambda r, f, _: r.add("caller", "submitted", text=f.text),
    **dict.fromkeys((LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame), TraceRecorder._response),
    **dict.fromkeys((FunctionCallInProgressFrame, FunctionCallResultFrame, FunctionCallCancelFrame),
                    TraceRecorder._tool),
    **dict.fromkeys((BotStartedSpeakingFrame, BotStoppedSpeakingFrame), TraceRecorder._bot_speech),
    InterruptionFrame: lambda r, f, _: r.add("bot", "interruption", bot_speaking=r._bot_speaking),
    LLMContextAssistantTurnFrame: lambda r, f, _: r.add("bot", "assistant_committed", text=f.text),
    ErrorFrame: lambda r, f, _: r.add("call", "error", error=str(f.error)),
}
_RECORDINGS: dict[type[Frame], _Recording | None] = {}


def _recording(kind: type[Frame]) -> _Recording | None:
    """How frames of this class are recorded, if they are (cached: a push pays one look-up)."""
    if kind not in _RECORDINGS:
        _RECORDINGS[kind] = next((_FIRST_PUSH[c] for c in kind.__mro__ if c in _FIRST_PUSH), None)
    return _RECORDINGS[kind]
