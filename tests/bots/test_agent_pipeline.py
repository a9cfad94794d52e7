"""Each bot's pipeline, built with dummy keys and inspected: services, harness placement, tools, turn strategy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator, LLMUserAggregator
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
from pipecat.services.google.llm import GoogleLLMService
from pipecat.services.llm_service import LLMService
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy

from bots.agent import Agent, build_agent
from bots.settings import BotSettings
from pipecat_harness.control import Placement
from pipecat_harness.demo import RETAIL_WRITE_TOOLS, RetailTools
from pipecat_harness.harness import TurnBoundaryProcessor
from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
from pipecat_harness.input.silent_reply import SilentReplyGuard
from pipecat_harness.placement import flatten


def _daily_transport() -> Any:
    from bots.daily_bot import daily_transport

    return daily_transport("https://example.daily.co/harness-test", None)


def _local_transport() -> Any:
    pytest.importorskip("pyaudio", reason="local bot needs PyAudio (pip install -e '.[local]' with portaudio)")
    from bots.local_bot import local_transport

    return local_transport()


def _twilio_transport() -> Any:
    from unittest.mock import MagicMock

    from fastapi import WebSocket

    from bots.twilio_bot import twilio_call

    call = twilio_call(MagicMock(spec=WebSocket), "MZ-test-stream", "CA-test-call", auto_hang_up=False)
    return call


TRANSPORTS = {"daily": _daily_transport, "local": _local_transport, "twilio": _twilio_transport}


async def _build(name: str, settings: BotSettings, **kwargs: Any) -> Agent:
    made = TRANSPORTS[name]()
    if name == "twilio":
        agent = await build_agent(made.transport, settings=settings, bot_name=name, call_id="CA-test-call",
                                  audio_out_sample_rate=8000, before_output=[made.mark_requester], **kwargs)
        made.attach(agent)
        return agent
    return await build_agent(made, settings=settings, bot_name=name, **kwargs)


def _index(processors: list[Any], kind: type) -> int:
    return next(i for i, p in enumerate(processors) if isinstance(p, kind))


@pytest.mark.parametrize("bot", ["daily", "local", "twilio"])
async def test_bot_uses_the_provider_services(bot: str, settings: BotSettings) -> None:
    agent = await _build(bot, settings)
    services = agent.services
    assert isinstance(services.stt, DeepgramSTTService)
    assert services.stt._settings.model.startswith("nova-3")
    assert isinstance(services.llm, GoogleLLMService)
    # The websocket ElevenLabs service is the one reporting word timestamps.
    assert type(services.tts) is ElevenLabsTTSService
    assert isinstance(agent.user_aggregator._params.vad_analyzer, SileroVADAnalyzer)
    order = [_index(agent.processors, t) for t in
             (BaseInputTransport, DeepgramSTTService, LLMUserAggregator, GoogleLLMService, ElevenLabsTTSService,
              BaseOutputTransport, LLMAssistantAggregator)]
    assert order == sorted(order)


@pytest.mark.parametrize("bot", ["daily", "local", "twilio"])
async def test_harness_controls_sit_where_the_architecture_says(bot: str, settings: BotSettings) -> None:
    agent = await _build(bot, settings)
    processors = flatten(agent.processors)  # each placement's processors stand as one group in the pipeline
    user_agg = _index(processors, LLMUserAggregator)
    llm = _index(processors, LLMService)
    output = _index(processors, BaseOutputTransport)
    assistant = _index(processors, LLMAssistantAggregator)
    stt = _index(processors, DeepgramSTTService)
    assert isinstance(processors[user_agg + 1], TurnBoundaryProcessor)
    placed = 0
    for control in agent.harness.controls:
        for placement, processor in control.processors():
            position = processors.index(processor)
            placed += 1
            if placement is Placement.BEFORE_USER_AGGREGATOR:
                assert stt < position < user_agg, (control.name, processor)
            elif placement is Placement.BEFORE_LLM:
                assert user_agg < position < llm, (control.name, processor)
            elif placement is Placement.AFTER_OUTPUT_TRANSPORT:
                assert output < position < assistant, (control.name, processor)
            else:
                assert position > assistant, (control.name, processor)
    # Spelling, silent reply, tool gate and (when present) history contribute processors by default.
    assert {"spelling", "silent_reply", "tool_gate"} <= agent.harness.active_controls
    assert placed >= 3


@pytest.mark.parametrize("bot", ["daily", "local", "twilio"])
async def test_every_retail_tool_is_registered_through_the_tool_gate(bot: str, settings: BotSettings) -> None:
    agent = await _build(bot, settings)
    registry = agent.services.llm._functions
    assert set(RetailTools(agent.db).handlers()) <= set(registry)
    for name in RetailTools(agent.db).handlers():
        assert registry[name].handler.__name__ == f"gated_{name}"
        if name in RETAIL_WRITE_TOOLS:
            assert registry[name].cancel_on_interruption is False
    assert agent.harness.write_tools >= RETAIL_WRITE_TOOLS
    schemas = {tool.name for tool in agent.context.tools.standard_tools}
    assert schemas == set(registry) - {None}


@pytest.mark.parametrize("bot", ["daily", "local", "twilio"])
async def test_smart_turn_stop_strategy_is_wrapped_by_the_identifier_hold(bot: str, settings: BotSettings) -> None:
    agent = await _build(bot, settings)
    stop = agent.user_aggregator._params.user_turn_strategies.stop
    # The bot's one strategy, held; the silent-reply guard beside it only ends empty turns.
    assert len(stop) == 2 and isinstance(stop[1], SilentReplyGuard)
    assert isinstance(stop[0], IdentifierHoldStopStrategy)
    assert isinstance(stop[0].inner, TurnAnalyzerUserTurnStopStrategy)
    assert isinstance(stop[0].inner._turn_analyzer, LocalSmartTurnAnalyzerV3)


async def test_speech_timeout_stop_strategy_is_selectable_and_wrapped(
    bot_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_TURN_STOP", "speech_timeout")
    monkeypatch.setenv("BOT_SPEECH_TIMEOUT_SECS", "0.9")
    agent = await _build("daily", BotSettings.from_env())
    stop, guard = agent.user_aggregator._params.user_turn_strategies.stop
    assert isinstance(guard, SilentReplyGuard)
    assert isinstance(stop, IdentifierHoldStopStrategy)
    assert isinstance(stop.inner, SpeechTimeoutUserTurnStopStrategy)
    assert stop.inner._user_speech_timeout == pytest.approx(0.9)


async def test_controls_switch_off_from_the_environment(bot_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPECAT_HARNESS_TOOL_GATE__ENABLED", "false")
    monkeypatch.setenv("PIPECAT_HARNESS_IDENTIFIER_HOLD__ENABLED", "false")
    agent = await _build("daily", BotSettings.from_env())
    assert "tool_gate" not in agent.harness.active_controls
    assert agent.services.llm._functions["issue_refund"].handler.__name__ == "issue_refund"
    stop, guard = agent.user_aggregator._params.user_turn_strategies.stop
    assert isinstance(guard, SilentReplyGuard)
    assert isinstance(stop, TurnAnalyzerUserTurnStopStrategy)


async def test_controls_switch_from_a_config_file(bot_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = bot_env / "harness.yaml"
    config.write_text("domain: retail\nspelling:\n  enabled: false\nchecklist:\n  enabled: false\n", encoding="utf-8")
    monkeypatch.setenv("PIPECAT_HARNESS_CONFIG", str(config))
    agent = await _build("daily", BotSettings.from_env())
    assert "spelling" not in agent.harness.active_controls
    assert "tool_gate" in agent.harness.active_controls


async def test_a_call_writes_its_trace_where_trace_show_reads_it(bot_env: Path, settings: BotSettings) -> None:
    agent = await _build("daily", settings, call_id="call-under-test")
    agent.harness.close()
    path = agent.trace_path
    assert path == bot_env / "traces" / "call-under-test.jsonl"
    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert header["kind"] == "call_started"
    assert header["bot"] == "daily"
    assert header["call_id"] == "call-under-test"


async def test_the_retail_database_is_created_once_and_reused(bot_env: Path, settings: BotSettings) -> None:
    first = await _build("daily", settings)
    order_id = await first.db.scalar("SELECT order_id FROM orders WHERE status != 'cancelled' LIMIT 1")
    await first.db.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?", (order_id,))
    second = await _build("daily", settings)
    assert await second.db.scalar("SELECT status FROM orders WHERE order_id = ?", (order_id,)) == "cancelled"


@pytest.mark.parametrize("turn_stop", ["smart_turn", "speech_timeout"])
async def test_held_turns_end_before_pipecats_turn_stop_watchdog(
    bot_env: Path, monkeypatch: pytest.MonkeyPatch, turn_stop: str
) -> None:
    from pipecat.audio.turn.smart_turn.base_smart_turn import STOP_SECS

    monkeypatch.setenv("BOT_TURN_STOP", turn_stop)
    settings = BotSettings.from_env()
    agent = await _build("daily", settings)
    params = agent.user_aggregator._params
    hold, _guard = params.user_turn_strategies.stop
    delay = STOP_SECS if turn_stop == "smart_turn" else settings.speech_timeout_secs
    # The longest the bot itself takes to end a held turn after the caller's last word.
    assert delay + hold._config.extra_wait_secs < params.user_turn_stop_timeout
