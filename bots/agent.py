"""The shared bot definition: a retail customer-service agent with the harness in its pipeline.

Deepgram nova-3 listens, Gemini decides, ElevenLabs speaks with word
timestamps, Silero (Pipecat's bundled ONNX model) detects speech inside the
user aggregator, Smart Turn v3 (or a speech timeout) ends user turns, and the
retail demo tools act on an SQLite database. The harness comes from
``HarnessConfig`` (``PIPECAT_HARNESS_CONFIG`` YAML and ``PIPECAT_HARNESS_*``
variables), and each call writes its trace to ``traces/<call id>.jsonl``.

Run it under Pipecat's development runner::

    python bots/agent.py -t webrtc     # browser mic/speaker page on http://localhost:7860
    python bots/agent.py -t daily      # a Daily room
    python bots/agent.py -t twilio -x <your-ngrok-host>

``local_bot.py``, ``daily_bot.py`` and ``twilio_bot.py`` build the same agent
on their transports.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loguru import logger
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import LLMRunFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregator,
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_transport import BaseTransport, TransportParams
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from bots.settings import PROVIDER_KEYS, BotSettings, Requirement
from pipecat_harness.config import HarnessConfig
from pipecat_harness.demo import RETAIL_WRITE_TOOLS, RetailDatabase, RetailTools
from pipecat_harness.demo.call_pipeline import build_call_pipeline
from pipecat_harness.harness import Harness

__all__ = [
    "SYSTEM_PROMPT",
    "TRANSPORT_PARAMS",
    "Agent",
    "Services",
    "bot",
    "build_agent",
    "chosen_transport",
    "create_services",
    "open_retail_database",
    "refuse_unsupported_transport",
    "runner_requirements",
]

SYSTEM_PROMPT = """\
You are Sam, the phone agent of an online retail store. You help callers with their orders:
look up an order, change the shipping address of a pending order, cancel a pending order,
return delivered items, or refund an amount.

Your words are spoken aloud on a phone line: answer in one or two short sentences, no lists,
no markdown, no emojis. Spell identifiers back character by character before acting on them.

Identify the caller first (email, or name and zip code) with the lookup tools. Order ids look
like #W followed by seven digits. Every change (address, cancellation, return, refund) is held
until the caller confirms it: call the tool, and when it answers "awaiting_confirmation" read
back exactly what it holds (the amount, the order id, the date) and ask; only after the
caller's plain yes call it again with the same arguments. A question or a "yes, but" is not a
yes: answer it and ask again. Act only through the tools; never say an action happened unless a
tool result says so. If a tool answers "not executed" or "blocked", tell the caller plainly and
do not retry on your own.
"""

GREETING_INSTRUCTION = "Greet the caller in one short sentence and ask how you can help with their order."

_DB_LOCK = asyncio.Lock()


@dataclass
class Services:
    """The three AI services of a bot (replaceable by fakes in tests)."""

    stt: STTService
    llm: LLMService[Any]
    tts: TTSService


def create_services(
    settings: BotSettings,
    *,
    audio_out_sample_rate: int | None = None,
    deepgram_base_url: str = "",
    gemini_http_options: Any = None,
    elevenlabs_url: str | None = None,
) -> Services:
    """Create Deepgram STT, Gemini LLM and ElevenLabs TTS; no connection opens before the pipeline starts.

    The endpoint arguments point the services elsewhere through their own
    base-URL options (the loopback fakes of :mod:`pipecat_harness.fakes`, in
    offline tests); by default they reach the providers.
    """
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
    from pipecat.services.google.llm import GoogleLLMService

    stt = DeepgramSTTService(
        api_key=settings.deepgram_api_key,
        base_url=deepgram_base_url,
        settings=DeepgramSTTService.Settings(model=settings.deepgram_model),
    )
    llm_settings = GoogleLLMService.Settings(system_instruction=SYSTEM_PROMPT)
    if settings.gemini_model:
        llm_settings.model = settings.gemini_model
    llm = GoogleLLMService(api_key=settings.google_api_key, settings=llm_settings, http_options=gemini_http_options)
    # The websocket service reports word timestamps, so history keeps only the words played.
    tts = ElevenLabsTTSService(
        api_key=settings.elevenlabs_api_key,
        settings=ElevenLabsTTSService.Settings(voice=settings.elevenlabs_voice_id, model=settings.elevenlabs_model),
        sample_rate=audio_out_sample_rate,
        **({"url": elevenlabs_url} if elevenlabs_url else {}),
    )
    return Services(stt=stt, llm=llm, tts=tts)


def user_turn_strategies(settings: BotSettings) -> UserTurnStrategies:
    """Pipecat's default start strategies; Smart Turn v3 or a speech timeout to stop."""
    if settings.turn_stop == "speech_timeout":
        stop: list[Any] = [SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=settings.speech_timeout_secs)]
    else:
        stop = [TurnAnalyzerUserTurnStopStrategy(turn_analyzer=LocalSmartTurnAnalyzerV3())]
    return UserTurnStrategies(stop=stop)


async def open_retail_database(path: str | Path) -> RetailDatabase:
    """Open the demo database, creating and seeding it the first time."""
    async with _DB_LOCK:
        if Path(path).exists():
            return RetailDatabase(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return await RetailDatabase.create(path)


@dataclass
class Agent:
    """One call's pipeline, worker and harness."""

    harness: Harness
    pipeline: Pipeline
    worker: PipelineWorker
    context: LLMContext
    user_aggregator: LLMUserAggregator
    assistant_aggregator: LLMAssistantAggregator
    services: Services
    db: RetailDatabase
    processors: list[FrameProcessor] = field(default_factory=list)

    @property
    def trace_path(self) -> Path | None:
        """Where this call's timeline is written (``None`` with tracing off)."""
        recorder = self.harness.recorder
        return recorder.path if recorder is not None else None

    async def greet(self) -> None:
        """Ask the model to open the conversation."""
        self.context.add_message({"role": "developer", "content": GREETING_INSTRUCTION})
        await self.worker.queue_frames([LLMRunFrame()])

    async def run(self, *, handle_sigint: bool = False, handle_sigterm: bool = False) -> None:
        """Run the call to its end, then close the trace."""
        runner = WorkerRunner(handle_sigint=handle_sigint, handle_sigterm=handle_sigterm)
        try:
            await runner.add_workers(self.worker)
            await runner.run()
        finally:
            self.harness.close()
            if self.trace_path is not None:
                logger.info(f"call trace: {self.trace_path}  (pipecat-harness trace show {self.trace_path})")


async def build_agent(
    transport: BaseTransport,
    *,
    settings: BotSettings,
    bot_name: str,
    call_id: str | None = None,
    services: Services | None = None,
    harness_config: HarnessConfig | None = None,
    audio_in_sample_rate: int = 16000,
    audio_out_sample_rate: int = 24000,
    before_output: Sequence[FrameProcessor] = (),
    idle_timeout_secs: float | None = 300,
    greet_on_connect: bool = True,
) -> Agent:
    """Build the agent's pipeline on ``transport`` with the harness in place.

    Args:
        transport: The call's transport.
        settings: Keys and settings (see ``.env.example``).
        bot_name: Which bot runs the call (written in the trace header).
        call_id: The call's id (Twilio's call SID, a Daily session id...); random when omitted.
        services: STT, LLM and TTS to use instead of the providers (tests pass fakes).
        harness_config: Instead of the config from ``settings``.
        audio_in_sample_rate: Pipeline input rate; Smart Turn needs 16 kHz.
        audio_out_sample_rate: Pipeline output rate.
        before_output: Processors to put right before ``transport.output()`` (Twilio marks).
        idle_timeout_secs: End the call after this long with no activity.
        greet_on_connect: Greet when the transport reports a connected client.
    """
    call_id = call_id or uuid.uuid4().hex[:12]
    config = harness_config or settings.harness_config()
    harness = Harness(
        config,
        call_id=call_id,
        strict=True,  # a wiring mistake here is a bug in the bot: refuse to run the call with a control bypassed
        write_tools=RETAIL_WRITE_TOOLS,
        trace_metadata={"bot": bot_name, "transport": type(transport).__name__},
    )
    services = services or create_services(settings, audio_out_sample_rate=audio_out_sample_rate)
    db = await open_retail_database(settings.retail_db_path)

    built = build_call_pipeline(
        harness=harness, llm=services.llm, tts=services.tts, output=transport.output(), tools=RetailTools(db),
        user_params=LLMUserAggregatorParams(
            # The harness raises user_turn_stop_timeout when a hold needs it (Harness.user_params).
            vad_analyzer=SileroVADAnalyzer(), user_turn_strategies=user_turn_strategies(settings)),
        source=[transport.input(), services.stt], before_output=before_output,
    )
    processors, context = built.processors, built.context
    user_aggregator, assistant_aggregator = built.user_aggregator, built.assistant_aggregator
    pipeline = Pipeline(processors)
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=audio_in_sample_rate,
            audio_out_sample_rate=audio_out_sample_rate,
            enable_metrics=True,
            enable_usage_metrics=True,
        ),
        observers=harness.observers(),
        idle_timeout_secs=idle_timeout_secs,
    )
    agent = Agent(harness, pipeline, worker, context, user_aggregator, assistant_aggregator, services, db, processors)
    _connect_transport_events(agent, transport, greet_on_connect=greet_on_connect)
    return agent


def _connect_transport_events(agent: Agent, transport: BaseTransport, *, greet_on_connect: bool) -> None:
    events = getattr(transport, "_event_handlers", {})
    if "on_client_connected" in events and greet_on_connect:
        @transport.event_handler("on_client_connected")
        async def on_client_connected(_transport: Any, _client: Any) -> None:
            logger.info("client connected")
            await agent.greet()

    if "on_client_disconnected" in events:
        @transport.event_handler("on_client_disconnected")
        async def on_client_disconnected(_transport: Any, _client: Any) -> None:
            logger.info("client disconnected: ending the call")
            await agent.worker.cancel()


#: The transports this bot serves, with the Pipecat transport params of each (for the runner's ``create_transport``).
TRANSPORT_PARAMS: dict[str, Callable[[], Any]] = {
    "daily": lambda: _daily_params(),
    "webrtc": lambda: TransportParams(audio_in_enabled=True, audio_out_enabled=True),
    "twilio": lambda: _websocket_params(),
}


def _daily_params() -> Any:
    from pipecat.transports.daily.transport import DailyParams

    return DailyParams(audio_in_enabled=True, audio_out_enabled=True)


def _websocket_params() -> Any:
    from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams

    return FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True)


def chosen_transport(argv: Sequence[str]) -> str | None:
    """The transport chosen with ``-t`` (``daily`` for ``-d``), or ``None`` (the runner's default, webrtc)."""
    transport = None
    for index, arg in enumerate(argv):
        if arg in ("-t", "--transport") and index + 1 < len(argv):
            transport = argv[index + 1]
        elif arg.startswith("--transport="):
            transport = arg.split("=", 1)[1]
        elif arg in ("-d", "--direct"):
            transport = "daily"
    return transport


def runner_requirements(argv: Sequence[str]) -> list[Requirement]:
    """What the development runner needs for the transport chosen with ``-t``."""
    from bots.settings import TWILIO_REQUIREMENTS

    transport = chosen_transport(argv)
    # Without -t every transport is served, and only the provider keys are needed up front.
    requirements = list(PROVIDER_KEYS)
    if transport == "daily":
        # The runner creates the room (or mints a token for DAILY_ROOM_URL) with the API key.
        requirements.append(Requirement.of("DAILY_API_KEY"))
    elif transport == "twilio":
        requirements.extend(TWILIO_REQUIREMENTS)
    return requirements


#: Settings and harness config validated by :func:`main` before the runner starts (``None`` under another runner).
_STARTUP: tuple[BotSettings, HarnessConfig] | None = None


async def bot(runner_args: Any) -> None:
    """Pipecat development runner entry point (``-t webrtc``, ``-t daily``, ``-t twilio``).

    Every transport comes from the runner's ``create_transport`` with
    :data:`TRANSPORT_PARAMS`. For a Twilio media stream the bot then wraps
    the serializer the runner built, so Twilio's ``mark`` echoes become
    playback receipts for the trace and the history control.
    """
    from pipecat.runner.types import WebSocketRunnerArguments
    from pipecat.runner.utils import create_transport

    settings, config = _STARTUP or (BotSettings.from_env(), None)
    call_id = (runner_args.session_id or uuid.uuid4().hex)[:12]
    # One params object per call, kept here: create_transport puts the call's serializer on it.
    twilio_params = _websocket_params()
    transport = await create_transport(runner_args, {**TRANSPORT_PARAMS, "twilio": lambda: twilio_params})
    before_output: list[FrameProcessor] = []
    audio_out = 24000
    call = None
    if isinstance(runner_args, WebSocketRunnerArguments):
        from bots.twilio_bot import TWILIO_AUDIO_OUT_SAMPLE_RATE, marked_twilio_call

        call_data = runner_args.call_data
        if call_data is None:  # create_transport parses the handshake of every telephony socket
            raise ValueError("the runner gave a media stream without its start message")
        call = marked_twilio_call(transport, twilio_params, call_data.stream_id, call_data.call_id)
        before_output, audio_out = [call.mark_requester], TWILIO_AUDIO_OUT_SAMPLE_RATE
        call_id = call_data.call_id or call_id
        bot_name = "runner-twilio"
    else:
        kinds = {"DailyRunnerArguments": "daily", "SmallWebRTCRunnerArguments": "webrtc"}
        bot_name = f"runner-{kinds.get(type(runner_args).__name__, type(transport).__name__)}"

    agent = await build_agent(
        transport, settings=settings, bot_name=bot_name, call_id=call_id, before_output=before_output,
        audio_out_sample_rate=audio_out, idle_timeout_secs=runner_args.pipeline_idle_timeout_secs,
        harness_config=config,
    )
    if call is not None:
        call.attach(agent)
    await agent.run(handle_sigint=runner_args.handle_sigint, handle_sigterm=runner_args.handle_sigterm)


def refuse_unsupported_transport(argv: Sequence[str]) -> None:
    """Exit 2 at start when ``-t`` names a transport this bot does not serve (instead of failing on a call)."""
    transport = chosen_transport(argv)
    if transport is not None and transport not in TRANSPORT_PARAMS:
        print(f"agent: transport {transport!r} is not supported by this bot; use -t "
              f"{', '.join(TRANSPORT_PARAMS)}", file=sys.stderr)
        raise SystemExit(2)


def main() -> None:
    """Check the transport, keys and config, then start Pipecat's development runner (``--help`` needs no keys)."""
    global _STARTUP
    from bots.settings import startup_settings, wants_help

    argv = sys.argv[1:]
    if not wants_help(argv):
        refuse_unsupported_transport(argv)
        _STARTUP = startup_settings("agent", runner_requirements(argv))
    from pipecat.runner.run import main as runner_main

    runner_main()


if __name__ == "__main__":
    main()
