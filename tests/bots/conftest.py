from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

# The bots are scripts in the repository, not part of the installed package.
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pytest
from pipecat.frames.frames import Frame
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import STTService

from bots.agent import Services
from bots.settings import BotSettings
from pipecat_harness.sim import scenario as sim_scenario
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.sim.sim_tts import SimulatedTTSService

# ruff: noqa: E402

DUMMY_KEYS = {"DEEPGRAM_API_KEY": "dummy-deepgram", "GOOGLE_API_KEY": "dummy-google",
              "ELEVENLABS_API_KEY": "dummy-elevenlabs"}


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


@pytest.fixture
def bot_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Dummy provider keys, and a database and trace directory in ``tmp_path``; nothing else from the host."""
    for name in ("PIPECAT_HARNESS_CONFIG", "BOT_TURN_STOP", "GEMINI_MODEL", "DAILY_ROOM_URL", "DAILY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in DUMMY_KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RETAIL_DB_PATH", str(tmp_path / "retail.db"))
    monkeypatch.setenv("PIPECAT_HARNESS_TRACE__DIRECTORY", str(tmp_path / "traces"))
    yield tmp_path


@pytest.fixture
def settings(bot_env: Path) -> BotSettings:
    return BotSettings.from_env()
