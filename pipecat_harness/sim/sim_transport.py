"""An output transport that plays audio on the event loop's clock.

Each chunk sleeps its duration on the loop (not ``time.monotonic``), so a barge-in lands mid-sentence and Pipecat's own
interruption path runs as in a real call.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from pipecat.frames.frames import Frame, InterruptionFrame, OutputAudioRawFrame, StartFrame, TTSAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams

from pipecat_harness.sim.sim_tts import SpeechLedger

__all__ = ["SimulatedOutputTransport"]


class SimulatedOutputTransport(BaseOutputTransport):
    """Plays output audio in (virtual) real time and records in ``ledger`` (shared with the TTS) what was played."""

    def __init__(self, *, ledger: SpeechLedger | None = None, sample_rate: int = 16000, **kwargs: Any) -> None:
        params = TransportParams(audio_out_enabled=True, audio_out_sample_rate=sample_rate)
        super().__init__(params, **kwargs)
        self.ledger = ledger or SpeechLedger()
        # The media sender re-chunks audio and drops context ids, so the bytes of each context are queued here in
        # arrival order and consumed as written.
        self._pending: deque[list[Any]] = deque()

    async def start(self, frame: StartFrame) -> None:
        """Start the transport and its media sender."""
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Note which context each incoming audio frame belongs to."""
        if isinstance(frame, InterruptionFrame):
            self._pending.clear()
        elif isinstance(frame, TTSAudioRawFrame) and direction == FrameDirection.DOWNSTREAM:
            self._pending.append([frame.context_id, len(frame.audio)])
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        """Sleep for the chunk's duration, then count it as played."""
        bytes_per_sec = frame.sample_rate * frame.num_channels * 2
        await asyncio.sleep(len(frame.audio) / bytes_per_sec)
        remaining = len(frame.audio)
        played = self.ledger.played_secs
        while remaining > 0 and self._pending:
            entry = self._pending[0]
            taken = min(remaining, entry[1])
            entry[1] -= taken
            remaining -= taken
            if entry[0]:
                played[entry[0]] = played.get(entry[0], 0.0) + taken / bytes_per_sec
            if entry[1] <= 0:
                self._pending.popleft()
        return True
