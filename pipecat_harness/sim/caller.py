"""The simulated caller: turns a scenario's caller script into timed frames."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.utils.time import time_now_iso8601

from pipecat_harness.sim.asr_format import format_transcript
from pipecat_harness.sim.caller_script import CallerSpec, CallerTurn, SpeechSegment

__all__ = ["VAD_START_SECS", "VAD_STOP_SECS", "CallerEvent", "SimulatedCaller"]

#: Pipecat's default VAD windows: speech is detected after 0.2 s, silence after 0.2 s.
VAD_START_SECS = 0.2
VAD_STOP_SECS = 0.2
_USER_ID = "caller"
# Loop timers within the clock resolution count as due without time advancing, so waits shorter than this would spin.
_EPSILON = 1e-6


@dataclass(frozen=True)
class CallerEvent:
    """A frame the caller will inject, at an offset from the start of its turn.

    Parameters:
        offset: Seconds from the start of the turn.
        kind: ``vad_start``, ``vad_stop``, ``interim`` or ``final``.
        text: The transcript text (as the recogniser writes it).
        finalized: For finals: whether the STT marks it finalized (it answers ``Finalize``).
        closes_segment: For finals: whether it is the last piece of its stretch of speech.
        segment_text: For closing finals: the whole stretch's transcript.
    """

    offset: float
    kind: str
    text: str = ""
    finalized: bool = True
    closes_segment: bool = True
    segment_text: str = ""


#: Seconds after a piece's last word until the recogniser sends that piece's final (endpointing).
_PIECE_LATENCY_SECS = 0.15


def plan_turn(turn: CallerTurn, voice: CallerSpec) -> list[CallerEvent]:
    """Lay out one caller turn as timed VAD and transcript events.

    Segments separated by a pause shorter than VAD's stop window are merged: VAD would not have seen the gap.
    """
    events: list[CallerEvent] = []
    segments = _merge_short_pauses(turn.speech)
    t = 0.0
    for segment in segments:
        if segment.pause is not None:
            t += segment.pause
            continue
        if segment.silent is not None:
            events.append(CallerEvent(t, "vad_start"))
            t += segment.silent
            events.append(CallerEvent(t + VAD_STOP_SECS, "vad_stop"))
            continue
        text = segment.say or ""
        duration = segment.secs or max(0.3, len(text.split()) * 60.0 / voice.words_per_minute)
        events.append(CallerEvent(t, "vad_start"))
        events.extend(_transcript_events(segment.asr, text, t, duration, voice))
        t += duration
        events.append(CallerEvent(t + VAD_STOP_SECS, "vad_stop"))
    return sorted(events, key=lambda e: e.offset)


def _transcript_events(asr: str | None, said: str, start: float, duration: float,
                       voice: CallerSpec) -> list[CallerEvent]:
    """Interims and final pieces of one stretch of speech."""
    words = said.split()
    written_words = asr.split() if asr is not None else words
    if not written_words:
        written_words = [asr or said]
    pieces = _split(written_words, min(voice.final_pieces, len(written_words)))
    events: list[CallerEvent] = []
    done = 0  # words already covered by earlier final pieces
    for number, piece in enumerate(pieces, start=1):
        closes = number == len(pieces)
        end_word = done + len(piece)
        piece_end = start + duration * end_word / len(written_words)
        for i in range(voice.interim_every_words, len(piece), voice.interim_every_words):
            at = start + duration * (done + i) / len(written_words)
            events.append(CallerEvent(at, "interim", _format(piece[:i], voice, closes=False, opens=number == 1)))
        if closes:
            if voice.finalize_delay_secs is not None:
                at = piece_end + VAD_STOP_SECS + voice.finalize_delay_secs
            else:
                at = piece_end + max(voice.asr_final_secs, VAD_STOP_SECS + 0.01)
            whole = asr if asr is not None else _format(words, voice, closes=True)
            events.append(CallerEvent(at, "final", _format(piece, voice, closes=True, opens=number == 1,
                                                           written=asr is not None),
                                      finalized=True, segment_text=whole))
        else:
            at = min(piece_end + _PIECE_LATENCY_SECS, start + duration)
            events.append(CallerEvent(at, "final", _format(piece, voice, closes=False, opens=number == 1,
                                                           written=asr is not None),
                                      finalized=False, closes_segment=False))
        done = end_word
    return events


def _split(words: list[str], count: int) -> list[list[str]]:
    size, extra = divmod(len(words), count)
    pieces, index = [], 0
    for n in range(count):
        length = size + (1 if n < extra else 0)
        pieces.append(words[index:index + length])
        index += length
    return pieces


def _format(words: list[str], voice: CallerSpec, *, closes: bool, opens: bool = True, written: bool = False) -> str:
    text = " ".join(words)
    if written:
        return text
    return format_transcript(text, voice.asr_format, closes_segment=closes, opens_segment=opens)


def _merge_short_pauses(segments: list[SpeechSegment]) -> list[SpeechSegment]:
    merged: list[SpeechSegment] = []
    for segment in segments:
        if (
            segment.say is not None
            and len(merged) >= 2
            and merged[-1].pause is not None
            and merged[-1].pause < VAD_STOP_SECS
            and merged[-2].say is not None
        ):
            pause = merged.pop().pause or 0.0
            previous = merged.pop()
            secs = None
            if previous.secs is not None or segment.secs is not None:
                secs = (previous.secs or 0.0) + pause + (segment.secs or 0.0) or None
            asr = None
            if previous.asr is not None or segment.asr is not None:
                asr = f"{previous.asr or previous.say} {segment.asr or segment.say}"
            merged.append(SpeechSegment(say=f"{previous.say} {segment.say}", secs=secs, asr=asr))
        else:
            merged.append(segment)
    return merged


def _frame_for(event: CallerEvent) -> Frame:
    if event.kind == "vad_start":
        return VADUserStartedSpeakingFrame(start_secs=VAD_START_SECS)
    if event.kind == "vad_stop":
        return VADUserStoppedSpeakingFrame(stop_secs=VAD_STOP_SECS)
    if event.kind == "interim":
        return InterimTranscriptionFrame(text=event.text, user_id=_USER_ID, timestamp=time_now_iso8601())
    return TranscriptionFrame(text=event.text, user_id=_USER_ID, timestamp=time_now_iso8601(),
                              finalized=event.finalized)


@dataclass
class _BotState:
    speaking: bool = False
    starts: int = 0
    last_start: float = 0.0
    last_stop: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class SimulatedCaller(BaseObserver):
    """Plays a caller script into a running ``PipelineWorker``.

    It is also an observer: it watches the bot start and stop speaking to time its turns.

    Args:
        voice: How speech maps to frames (speaking rate, ASR latency).
        recogniser: A live recogniser to drive instead of injecting transcripts (``interim(text)``,
            ``expect_final(text)``, ``final(text)``, as :class:`~pipecat_harness.fakes.DeepgramFake` offers).
        sample_rate: Rate of the audio streamed while speaking (with a recogniser).
    """

    def __init__(self, turns: list[CallerTurn], voice: CallerSpec, *, recogniser: Any = None,
                 sample_rate: int = 16000) -> None:
        super().__init__(observe_every_push=False)
        self._turns = turns
        self._voice = voice
        self._recogniser = recogniser
        self._sample_rate = sample_rate
        self._bot = _BotState()
        self.completed = False
        self.gave_up_at_turn: int | None = None
        self.log: list[dict[str, Any]] = []

    async def on_push_frame(self, data: FramePushed) -> None:
        """Track the bot's speaking state."""
        if data.direction != FrameDirection.DOWNSTREAM:
            return
        loop_time = asyncio.get_running_loop().time()
        if isinstance(data.frame, BotStartedSpeakingFrame):
            self._bot.speaking = True
            self._bot.starts += 1
            self._bot.last_start = loop_time
            self._bot.changed.set()
        elif isinstance(data.frame, BotStoppedSpeakingFrame):
            self._bot.speaking = False
            self._bot.last_stop = loop_time
            self._bot.changed.set()

    async def run(self, worker: Any, *, linger_secs: float = 1.0, final_wait_secs: float = 12.0) -> None:
        """Speak every turn, then wait for the bot's last reply and end the call."""
        loop = asyncio.get_running_loop()
        call_start = loop.time()
        for index, turn in enumerate(self._turns):
            since = self._bot.starts
            if turn.after == "start":
                await asyncio.sleep(max(0.0, call_start + turn.delay - loop.time()))
            elif not await self._wait_for_bot(since, turn):
                self.gave_up_at_turn = index
                self.log.append({"t": loop.time() - call_start, "event": "caller_gave_up", "turn": index})
                break
            self.log.append({"t": loop.time() - call_start, "event": "caller_turn", "turn": index})
            await self._speak(worker, turn)
        else:
            self.completed = True
            await self._wait_for_bot(
                self._bot.starts, CallerTurn(after="bot", delay=linger_secs, wait=final_wait_secs,
                                             speech=[SpeechSegment(pause=0)]),
            )
        await self._end_call(worker)

    async def _end_call(self, worker: Any) -> None:
        await worker.queue_frame(EndFrame())

    async def _speak(self, worker: Any, turn: CallerTurn) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        events = plan_turn(turn, self._voice)
        audio: asyncio.Task[None] | None = None
        try:
            for index, event in enumerate(events):
                await asyncio.sleep(max(0.0, start + event.offset - loop.time()))
                if self._recogniser is None:
                    await worker.queue_frame(_frame_for(event))
                    continue
                if event.kind == "vad_start":
                    final = next((e for e in events[index:] if e.kind in ("final", "vad_start") and e is not event),
                                 None)
                    if final is not None and final.kind == "final":
                        self._recogniser.expect_final(final.text)
                    audio = audio or asyncio.ensure_future(self._stream_audio(worker))
                    await worker.queue_frame(_frame_for(event))
                elif event.kind == "vad_stop":
                    if audio is not None:
                        audio.cancel()
                        audio = None
                    await worker.queue_frame(_frame_for(event))
                elif event.kind == "interim":
                    await self._recogniser.interim(event.text)
                else:
                    await self._recogniser.final(event.text)
        finally:
            if audio is not None:
                audio.cancel()

    async def _stream_audio(self, worker: Any, chunk_secs: float = 0.04) -> None:
        """Stream (silent) caller audio into the pipeline, as a transport would while the caller speaks."""
        chunk = bytes(int(self._sample_rate * chunk_secs) * 2)
        while True:
            await worker.queue_frame(InputAudioRawFrame(audio=chunk, sample_rate=self._sample_rate, num_channels=1))
            await asyncio.sleep(chunk_secs)

    async def _wait_for_bot(self, since: int, turn: CallerTurn) -> bool:
        if not await self._bot_started(since, turn.wait):
            return False
        if turn.after == "bot_started":
            await asyncio.sleep(max(0.0, self._bot.last_start + turn.delay - asyncio.get_running_loop().time()))
            return True
        return await self._bot_quiet_for(turn.delay)

    async def _bot_started(self, since: int, wait: float) -> bool:
        """Wait for the bot's next start after ``since``; False when ``wait`` seconds passed first."""
        deadline = asyncio.get_running_loop().time() + wait
        while self._bot.starts <= since:
            if not await self._changed(deadline - asyncio.get_running_loop().time()):
                return False
        return True

    async def _bot_quiet_for(self, delay: float) -> bool:
        """Wait until the bot has been quiet for ``delay`` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            if self._bot.speaking:
                await self._changed(None)
                continue
            quiet_for = loop.time() - self._bot.last_stop
            if quiet_for >= delay - _EPSILON:
                return True
            await self._changed(delay - quiet_for)

    async def _changed(self, timeout: float | None) -> bool:
        """Wait for a bot state change; False when ``timeout`` passed first."""
        if timeout is not None and timeout <= _EPSILON:
            return False
        self._bot.changed.clear()
        try:
            await asyncio.wait_for(self._bot.changed.wait(), timeout)
        except TimeoutError:
            return False
        return True
