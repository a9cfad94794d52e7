from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bots.settings import BotSettings

DUMMY_KEYS = {"DEEPGRAM_API_KEY": "dummy-deepgram", "GOOGLE_API_KEY": "dummy-google",
              "ELEVENLABS_API_KEY": "dummy-elevenlabs"}


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
