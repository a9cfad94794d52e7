"""A bot started without a needed key names the variable and exits non-zero before connecting anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bots.settings import BotSettings, MissingSettingsError, Requirement, missing_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
PROVIDERS = "DEEPGRAM_API_KEY, GOOGLE_API_KEY, ELEVENLABS_API_KEY"


def _run(script: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # An empty environment apart from what Python needs; no .env in cwd; no proxy, so nothing can connect.
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "bots" / script), *args],
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd.parent / "home"), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("script", "args", "env", "expected"),
    [
        ("local_bot.py", (), {}, PROVIDERS),
        ("daily_bot.py", (), {}, PROVIDERS + ", DAILY_API_KEY or DAILY_ROOM_URL"),
        ("twilio_bot.py", (), {}, PROVIDERS + ", TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN or TWILIO_API_KEY and "
                                              "TWILIO_API_SECRET"),
        ("agent.py", ("-t", "webrtc"), {}, PROVIDERS),
        ("daily_bot.py", (), {"DEEPGRAM_API_KEY": "k", "GOOGLE_API_KEY": "k", "DAILY_ROOM_URL": "https://x.daily.co/r"},
         "ELEVENLABS_API_KEY"),
        ("agent.py", ("-t", "daily"), {"DEEPGRAM_API_KEY": "k", "GOOGLE_API_KEY": "k", "ELEVENLABS_API_KEY": "k"},
         "DAILY_API_KEY"),
        ("agent.py", ("-t", "twilio"), {"DEEPGRAM_API_KEY": "k", "GOOGLE_API_KEY": "k", "ELEVENLABS_API_KEY": "k",
                                        "TWILIO_ACCOUNT_SID": "AC"}, "TWILIO_AUTH_TOKEN or TWILIO_API_KEY and "
                                                                     "TWILIO_API_SECRET"),
    ],
)
def test_bot_without_a_needed_key_names_it_and_exits(
    script: str, args: tuple[str, ...], env: dict[str, str], expected: str, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = _run(script, env, workdir, *args)
    assert result.returncode == 2, result.stderr
    name = script.removesuffix(".py")
    assert f"{name}: missing environment variable(s): {expected}\n" in result.stderr
    assert "Traceback" not in result.stderr
    # Nothing was created: no database, no trace, no server banner.
    assert list(workdir.iterdir()) == []
    assert "Uvicorn running" not in result.stderr


def test_keys_in_a_dotenv_file_in_the_working_directory_are_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("DEEPGRAM_API_KEY=k\nGOOGLE_API_KEY=k\n", encoding="utf-8")
    result = _run("local_bot.py", {}, tmp_path)
    assert result.returncode == 2
    assert "local_bot: missing environment variable(s): ELEVENLABS_API_KEY\n" in result.stderr


def test_requirements_accept_any_complete_alternative() -> None:
    twilio_auth = Requirement.of("TWILIO_AUTH_TOKEN", "TWILIO_API_KEY+TWILIO_API_SECRET")
    assert twilio_auth.satisfied_by({"TWILIO_AUTH_TOKEN": "t"})
    assert twilio_auth.satisfied_by({"TWILIO_API_KEY": "SK", "TWILIO_API_SECRET": "s"})
    assert not twilio_auth.satisfied_by({"TWILIO_API_KEY": "SK"})
    assert not twilio_auth.satisfied_by({"TWILIO_AUTH_TOKEN": "  "})
    assert missing_settings([twilio_auth], {}) == ["TWILIO_AUTH_TOKEN or TWILIO_API_KEY and TWILIO_API_SECRET"]


def test_settings_refuse_missing_keys_and_bad_values() -> None:
    with pytest.raises(MissingSettingsError) as missing:
        BotSettings.from_env({"DEEPGRAM_API_KEY": "k"})
    assert missing.value.missing == ["GOOGLE_API_KEY", "ELEVENLABS_API_KEY"]
    keys = {"DEEPGRAM_API_KEY": "k", "GOOGLE_API_KEY": "k", "ELEVENLABS_API_KEY": "k"}
    with pytest.raises(ValueError, match="BOT_TURN_STOP"):
        BotSettings.from_env({**keys, "BOT_TURN_STOP": "vibes"})
    with pytest.raises(ValueError, match="BOT_SPEECH_TIMEOUT_SECS"):
        BotSettings.from_env({**keys, "BOT_SPEECH_TIMEOUT_SECS": "soon"})
    settings = BotSettings.from_env({**keys, "GEMINI_MODEL": "gemini-2.5-flash"})
    assert (settings.gemini_model, settings.turn_stop, settings.deepgram_model) == (
        "gemini-2.5-flash", "smart_turn", "nova-3-general")
