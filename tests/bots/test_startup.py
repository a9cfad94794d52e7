"""Bots follow Pipecat's runner conventions and check everything they can before the first call."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bots.test_missing_keys import _run

KEYS = {"DEEPGRAM_API_KEY": "k", "GOOGLE_API_KEY": "k", "ELEVENLABS_API_KEY": "k"}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_agent_help_needs_no_keys(workdir: Path) -> None:
    result = _run("agent.py", {}, workdir, "--help")
    assert result.returncode == 0, result.stderr
    assert "--transport" in result.stdout and "missing environment variable" not in result.stderr


@pytest.mark.parametrize("transport", ["livekit", "telnyx"])
def test_agent_refuses_a_transport_it_does_not_serve_at_start(transport: str, workdir: Path) -> None:
    result = _run("agent.py", KEYS, workdir, "-t", transport)
    assert result.returncode == 2
    assert f"agent: transport '{transport}' is not supported by this bot; use -t daily, webrtc, twilio" in result.stderr
    assert "Traceback" not in result.stderr and list(workdir.iterdir()) == []


@pytest.mark.parametrize("script", ["agent.py", "daily_bot.py", "local_bot.py"])
def test_a_wrong_harness_config_stops_the_bot_at_start(script: str, workdir: Path) -> None:
    env = {**KEYS, "DAILY_ROOM_URL": "https://x.daily.co/r", "PIPECAT_HARNESS_CONFIG": str(workdir / "nope.yaml")}
    result = _run(script, env, workdir, *(["-t", "webrtc"] if script == "agent.py" else []))
    assert result.returncode == 2, result.stderr
    name = script.removesuffix(".py")
    assert f"{name}: {workdir / 'nope.yaml'}: cannot read config" in result.stderr
    assert "Traceback" not in result.stderr and "Uvicorn running" not in result.stderr


def test_a_bad_harness_variable_stops_the_twilio_bot_at_start(workdir: Path) -> None:
    env = {**KEYS, "TWILIO_ACCOUNT_SID": "AC", "TWILIO_AUTH_TOKEN": "t", "PIPECAT_HARNESS_HISTORY__BIAS": "2"}
    result = _run("twilio_bot.py", env, workdir)
    assert result.returncode == 2
    assert "PIPECAT_HARNESS_HISTORY__BIAS" in result.stderr and "Uvicorn running" not in result.stderr


def test_transport_params_come_per_transport_for_the_runner() -> None:
    from bots.agent import TRANSPORT_PARAMS

    assert set(TRANSPORT_PARAMS) == {"daily", "webrtc", "twilio"}
    for make in TRANSPORT_PARAMS.values():
        params = make()
        assert params.audio_in_enabled and params.audio_out_enabled
