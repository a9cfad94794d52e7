"""The simulated caller on a phone line: the script voiced, streamed as 20 ms audio frames on the virtual clock."""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.frames.frames import InputAudioRawFrame

from pipecat_harness.sim.audio.voice import SAMPLE_RATE, PiperCallerVoice
from pipecat_harness.sim.caller import SimulatedCaller
from pipecat_harness.sim.scenario import CallerSpec, CallerTurn

__all__ = ["FRAME_SECS", "AudioCaller", "turn_audio"]

FRAME_SECS = 0.02
_FRAME_BYTES = int(SAMPLE_RATE * FRAME_SECS) * 2


def turn_audio(turn: CallerTurn, voice: PiperCallerVoice, *, rate: float = 1.0) -> bytes:
    """The PCM of one caller turn: each ``say`` voiced, pauses as silence, ``silent`` speech as a murmur."""
    out = bytearray()
    for segment in turn.speech:
        if segment.pause is not None:
            out += bytes(int(segment.pause * SAMPLE_RATE) * 2)
        elif segment.silent is not None:
            out += voice.murmur(segment.silent)
        elif segment.say:
            out += voice.say(segment.say, rate=rate)
    return bytes(out)


class AudioCaller(SimulatedCaller):
    """Speaks a caller script as audio into a running ``PipelineWorker``.

    ``rate`` multiplies Piper's own pace (default: the ``spec``'s words per minute over 150).
    """

    def __init__(
        self, turns: list[CallerTurn], spec: CallerSpec, voice: PiperCallerVoice, *, rate: float | None = None
    ) -> None:
        super().__init__(turns, spec)
        self._piper = voice
        self.rate = rate if rate is not None else spec.words_per_minute / 150.0
        self._pending = bytearray()
        self._drained = asyncio.Event()
        self._line: asyncio.Task[None] | None = None

    async def run(self, worker: Any, *, linger_secs: float = 1.0, final_wait_secs: float = 12.0) -> None:
        """Open the line, play the script, hang up."""
        self._line = asyncio.create_task(self._stream(worker))
        try:
            await super().run(worker, linger_secs=linger_secs, final_wait_secs=final_wait_secs)
        finally:
            if self._line is not None:
                self._line.cancel()

    async def _speak(self, worker: Any, turn: CallerTurn) -> None:
        audio = turn_audio(turn, self._piper, rate=self.rate)
        if not audio:
            return
        self._drained.clear()
        self._pending += audio
        await self._drained.wait()

    async def _end_call(self, worker: Any) -> None:
        if self._line is not None:
            self._line.cancel()
            self._line = None
        await super()._end_call(worker)

    async def _stream(self, worker: Any) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            chunk = bytes(self._pending[:_FRAME_BYTES]).ljust(_FRAME_BYTES, b"\x00")
            if self._pending:
                del self._pending[:_FRAME_BYTES]
                if not self._pending:
                    self._drained.set()
            await worker.queue_frame(InputAudioRawFrame(audio=chunk, sample_rate=SAMPLE_RATE, num_channels=1))
            due += FRAME_SECS
            await asyncio.sleep(max(0.0, due - loop.time()))
