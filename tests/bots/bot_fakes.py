"""Offline stand-ins for the bots' provider services (no keys, no network)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from pipecat.frames.frames import Frame
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import STTService

from bots.agent import Services
from pipecat_harness.sim import scenario as sim_scenario
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.sim.sim_tts import SimulatedTTSService


class RecordingSTTService(STTService):
    """An offline STT: keeps the audio it receives and transcribes nothing."""

    def __init__(self) -> None:
        super().__init__(settings=STTSettings(model="recording", language=None, extra={}))
        self.audio_bytes = 0
        self.sample_rates: set[int] = set()

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        self.audio_bytes += len(audio)
        self.sample_rates.add(self.sample_rate)
        yield None


def fake_services(greeting: str = "Hello, this is the store. How can I help with your order?") -> Services:
    script = sim_scenario.ModelScript(greeting=greeting, first_token_secs=0.0, token_secs=0.0)
    return Services(
        stt=RecordingSTTService(),
        llm=ScriptedLLMService(script),
        tts=SimulatedTTSService(word_timestamps=True, first_audio_secs=0.01, chunk_secs=0.05,
                                words_per_minute=400, sample_rate=8000),
    )
