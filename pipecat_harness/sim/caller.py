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
from pipecat_harness.sim.scenario import CallerSpec, CallerTurn, SpeechSegment

__all__ = ["VAD_START_SECS", "VAD_STOP_SECS", "CallerEvent", "SimulatedCaller"]

#: Pipecat's default VAD windows: speech is detected after 0.2 s, silence after 0.2 s.
VAD_START_SECS = 0.2
VAD_STOP_SECS = 0.2
_USER_ID = "caller"
# Loop timers within the clock resolution count as due without time advancing, so waits shorter than this would spin.
_EPSILON = 1e-6
#: Seconds after a piece's last word until the recogniser sends that piece's final (endpointing).
_PIECE_LATENCY_SECS = 0.15


@dataclass(frozen=True)
class CallerEvent:
    """A ``vad_start``, ``vad_stop``, ``interim`` or ``final`` the caller injects ``offset`` seconds into its turn.

    A final may be ``finalized`` (it answers the STT's ``Finalize``) and close its stretch of speech (then
    ``segment_text`` is the whole stretch's transcript).
    """

    offset: float
    kind: str
    text: str = ""
    finalized: bool = True
    closes_segment: bool = True
    segment_text: str = ""


def plan_turn(turn: CallerTurn, voice: CallerSpec) -> list[CallerEvent]:
    """Lay out one caller turn as timed VAD and transcript events."""
    events: list[CallerEvent] = []
    t = 0.0
    for segment in _merge_short_pauses(turn.speech):
        if segment.pause is not None:
            t += segment.pause
            continue
        events.append(CallerEvent(t, "vad_start"))
        if segment.silent is not None:
            duration = segment.silent
        else:
            text = segment.say or ""
            duration = segment.secs or max(0.3, len(text.split()) * 60.0 / voice.words_per_minute)
            events.extend(_transcript_events(segment.asr, text, t, duration, voice))
        t += duration
        events.append(CallerEvent(t + VAD_STOP_SECS, "vad_stop"))
    return sorted(events, key=lambda e: e.offset)


def _transcript_events(asr: str | None, said: str, start: float, duration: float,
                       voice: CallerSpec) -> list[CallerEvent]:
    """Interims and final pieces of one stretch of speech."""
    words = said.split()
    written_words = (asr.split() if asr is not None else words) or [asr or said]
    pieces = _split(written_words, min(voice.final_pieces, len(written_words)))
    events: list[CallerEvent] = []
    done = 0  # words already covered by earlier final pieces
    for number, piece in enumerate(pieces, start=1):
        closes, opens = number == len(pieces), number == 1
        piece_end = start + duration * (done + len(piece)) / len(written_words)
        for i in range(voice.interim_every_words, len(piece), voice.interim_every_words):
            at = start + duration * (done + i) / len(written_words)
            events.append(CallerEvent(at, "interim", _format(piece[:i], voice, closes=False, opens=opens)))
        text = _format(piece, voice, closes=closes, opens=opens, written=asr is not None)
        if not closes:
            at = min(piece_end + _PIECE_LATENCY_SECS, start + duration)
        elif voice.finalize_delay_secs is not None:
            at = piece_end + VAD_STOP_SECS + voice.finalize_delay_secs
        else:
            at = piece_end + max(voice.asr_final_secs, VAD_STOP_SECS + 0.01)
        whole = (asr if asr is not None else _format(words, voice, closes=True)) if closes else ""
        events.append(CallerEvent(at, "final", text, finalized=closes, closes_segment=closes, segment_text=whole))
        done += len(piece)
    return events


def _split(words: list[str], count: int) -> list[list[str]]:
    """``words`` in ``count`` consecutive pieces, the first ones a word longer when they do not divide evenly."""
    size, extra = divmod(len(words), count)
    return [words[n * size + min(n, extra) : (n + 1) * size + min(n + 1, extra)] for n in range(count)]


def _format(words: list[str], voice: CallerSpec, *, closes: bool, opens: bool = True, written: bool = False) -> str:
    text = " ".join(words)
    return text if written else format_transcript(text, voice.asr_format, closes_segment=closes, opens_segment=opens)


def _merge_short_pauses(segments: list[SpeechSegment]) -> list[SpeechSegment]:
    """Merge the speech around a pause shorter than VAD's stop window (VAD would not have seen the gap)."""
    merged: list[SpeechSegment] = []
    for segment in segments:
        gap = merged[-1].pause if len(merged) >= 2 else None
        if segment.say is None or gap is None or gap >= VAD_STOP_SECS or merged[-2].say is None:
            merged.append(segment)
            continue
        merged.pop()
        previous = merged.pop()
        timed = previous.secs is not None or segment.secs is not None
        secs = (previous.secs or 0.0) + gap + (segment.secs or 0.0) if timed else None
        written = previous.asr is not None or segment.asr is not None
        asr = f"{previous.asr or previous.say} {segment.asr or segment.say}" if written else None
        merged.append(SpeechSegment(say=f"{previous.say} {segment.say}", secs=secs, asr=asr))
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
    """Plays a caller script into a running ``PipelineWorker``; as an observer, it times its turns by the bot's speech.

    With a ``recogniser`` (``interim``, ``expect_final`` and ``final`` of a text, as
    :class:`~pipecat_harness.fakes.DeepgramFake` offers) it drives that instead of injecting transcripts, streaming
    silent audio at ``sample_rate`` while it speaks.
    """

    def __init__(self, turns: list[CallerTurn], voice: CallerSpec, *, recogniser: Any = None,
                 sample_rate: int = 16000) -> None:
        super().__init__(observe_every_push=False)
        self._turns = turns
        self._voice = voice
        self._recogniser = recogniser
        self._sample_rate = sample_rate
        self._bot = _BotState()
        self._call_start = 0.0
        self.completed = False
        self.gave_up_at_turn: int | None = None
        self.log: list[dict[str, Any]] = []

    async def on_push_frame(self, data: FramePushed) -> None:
        """Track the bot's speaking state."""
        if data.direction != FrameDirection.DOWNSTREAM:
            return
        bot, now = self._bot, asyncio.get_running_loop().time()
        if isinstance(data.frame, BotStartedSpeakingFrame):
            bot.speaking, bot.starts, bot.last_start = True, bot.starts + 1, now
        elif isinstance(data.frame, BotStoppedSpeakingFrame):
            bot.speaking, bot.last_stop = False, now
        else:
            return
        bot.changed.set()

    async def run(self, worker: Any, *, linger_secs: float = 1.0, final_wait_secs: float = 12.0) -> None:
        """Speak every turn, then wait for the bot's last reply and end the call."""
        loop = asyncio.get_running_loop()
        self._call_start = loop.time()
        for index, turn in enumerate(self._turns):
            since = self._bot.starts
            if turn.after == "start":
                await asyncio.sleep(max(0.0, self._call_start + turn.delay - loop.time()))
            elif not await self._wait_for_bot(since, turn):
                self._give_up(index)
                break
            self._note("caller_turn", index)
            await self._speak(worker, turn)
        else:
            self.completed = True
            await self._linger(linger_secs, final_wait_secs)
        await self._end_call(worker)

    def _note(self, event: str, turn: int, **said: str) -> None:
        """Log a caller event at its time since the call started."""
        t = asyncio.get_running_loop().time() - self._call_start
        self.log.append({"t": t, "event": event, "turn": turn, **said})

    def _give_up(self, turn: int) -> None:
        self.gave_up_at_turn = turn
        self._note("caller_gave_up", turn)

    async def _linger(self, secs: float, wait: float) -> None:
        """After the caller's last line: wait up to ``wait`` for the bot's reply, then until it is quiet ``secs``."""
        if await self._bot_started(self._bot.starts, wait):
            await self._bot_quiet_for(secs)

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
                if self._recogniser is not None and event.kind == "vad_start":
                    final = next((e for e in events[index + 1 :] if e.kind in ("final", "vad_start")), None)
                    if final is not None and final.kind == "final":
                        self._recogniser.expect_final(final.text)
                    audio = audio or asyncio.ensure_future(self._stream_audio(worker))
                elif event.kind == "vad_stop" and audio is not None:
                    audio.cancel()
                    audio = None
                if self._recogniser is None or event.kind in ("vad_start", "vad_stop"):
                    await worker.queue_frame(_frame_for(event))
                else:  # an ``interim`` or a ``final``: the recogniser's method of that name
                    await getattr(self._recogniser, event.kind)(event.text)
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
