"""Run a scenario as a complete call through a real Pipecat ``PipelineWorker``, on virtual time.

The pipeline is a bot's minus the network: caller frames are injected at their times, Pipecat's own strategies decide
turns, the scripted LLM calls tools through Pipecat's function calling against a real SQLite database, and the simulated
TTS and transport play audio of realistic length on the loop's clock, so barge-ins land mid-sentence. The model may be a
real one (:mod:`~pipecat_harness.sim.model_arm`), the caller one played from a goal (:mod:`~.goal_caller`), the services
the bots' own against the protocol fakes on 127.0.0.1 (:class:`LoopbackServices`).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregatorParams
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner
from pydantic import BaseModel, ValidationError

from pipecat_harness.config import HarnessConfig
from pipecat_harness.demo.call_pipeline import build_call_pipeline
from pipecat_harness.demo.callbacks import CALLBACK_WRITE_TOOLS, CallbackTools
from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, ToolHandler
from pipecat_harness.fakes.deepgram import DeepgramFake
from pipecat_harness.fakes.elevenlabs import ElevenLabsFake, SynthesizedWord
from pipecat_harness.fakes.gemini import GeminiFake
from pipecat_harness.fakes.openai_chat import OpenAIChatFake
from pipecat_harness.fakes.server import Exchange, LoopbackServer
from pipecat_harness.harness import Harness
from pipecat_harness.sim.call_checks import check_context, check_history, check_state
from pipecat_harness.sim.call_result import CallResult, CheckResult, ModelUsage
from pipecat_harness.sim.caller import SimulatedCaller
from pipecat_harness.sim.clock import LoopClock, run_on_virtual_time
from pipecat_harness.sim.goal_caller import GoalCaller, GoalCallerSettings
from pipecat_harness.sim.history_metrics import measure_playback
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.model_meter import ModelMeter
from pipecat_harness.sim.scenario import Scenario, ScenarioError, ToolFault
from pipecat_harness.sim.scenario_tools import ScenarioTools, create_tables
from pipecat_harness.sim.scripted_llm import ScriptedChatModel, ScriptedLLMService, context_messages
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService, SpeechLedger, SpokenWord
from pipecat_harness.validation import describe_validation_error

if TYPE_CHECKING:
    from pipecat_harness.sim.audio.mode import AudioMode

__all__ = ["SIM_SERVICES", "CallResult", "CheckResult", "LoopbackServices", "ModelUsage", "SimServices",
           "create_database", "fault_wrapper", "run_scenario", "scenario_config", "simulate_call", "tool_sets"]

SimServices = Literal["scripted", "loopback", "loopback-openai"]
SIM_SERVICES: tuple[str, ...] = ("scripted", "loopback", "loopback-openai")
LoopbackLLM = Literal["gemini", "openai"]

_SAMPLE_RATE = 16000
_PROVIDER_LANES = {"gemini": "model", "openai": "model", "elevenlabs": "bot", "deepgram": "caller"}
_KEY = "loopback"


def scenario_config(scenario: Scenario, config: HarnessConfig) -> HarnessConfig:
    """``config`` with the scenario's own settings applied (its switches as given); a bad one is a ScenarioError."""
    update = {}
    where = scenario.source or scenario.name
    for block, values in scenario.harness.items():
        current = getattr(config, block, None)
        if not isinstance(current, BaseModel) or not isinstance(values, dict):
            raise ScenarioError(f"{where}: field 'harness.{block}' is not a settings block")
        settings = {k: v for k, v in values.items() if k != "enabled"}
        try:
            update[block] = type(current).model_validate({**current.model_dump(), **settings})
        except ValidationError as exc:
            raise ScenarioError(f"{where}: harness.{block}: {describe_validation_error(exc)}") from exc
    return config.model_copy(update=update) if update else config


async def tool_sets(scenario: Scenario, db: RetailDatabase) -> list[Any]:
    """The demo tool sets the scenario adds to the retail tools."""
    extra: list[Any] = []
    for name in scenario.tools:
        if name == "callbacks":
            extra.append(CallbackTools(db))
        elif name == "policies":
            from pipecat_harness.demo.policies import PolicyTools

            extra.append(await PolicyTools.create())
    return extra


async def create_database(scenario: Scenario, workdir: Path) -> RetailDatabase:
    """The call's business database: the named seed, the scenario's own tables, then its statements one by one."""
    path = workdir / f"{scenario.name}.db"
    # The empty seed is an empty database: the scenario's own tables may reuse the retail names.
    db = await RetailDatabase.create(path, seed=None) if scenario.database.seed == "retail" else RetailDatabase(path)
    await create_tables(scenario, db)
    for index, statement in enumerate(scenario.database.sql):
        try:
            await db.execute(statement)
        except Exception as exc:  # sqlite3 errors: the scenario's SQL is wrong, not the simulator
            raise ScenarioError(f"{scenario.source or scenario.name}: field 'database.sql[{index}]': the statement "
                                f"failed ({exc}); fix it against the {scenario.database.seed!r} schema") from exc
    return db


def fault_wrapper(faults: list[ToolFault], counts: dict[str, int]) -> Callable[[str, ToolHandler], ToolHandler]:
    """Wrap business handlers so scripted backend faults happen under the tool layer."""

    def wrap(name: str, handler: ToolHandler) -> ToolHandler:
        async def call(arguments: Mapping[str, Any]) -> Any:
            counts[name] = counts.get(name, 0) + 1
            fault = next((f for f in faults if f.tool == name and f.occurrence == counts[name]), None)
            if fault is None:
                return await handler(arguments)
            if fault.kind == "raise":
                raise RuntimeError(fault.message)
            if fault.kind == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(fault.secs)
            result = await handler(arguments)
            if fault.kind == "lost_reply":
                raise TimeoutError(fault.message)
            return result

        call.__name__ = name
        return call

    return wrap


@dataclass
class LoopbackServices:
    """The fakes of one call and the Pipecat services pointed at them (:meth:`start`, then :meth:`stop`)."""

    stt: STTService
    llm: LLMService[Any]
    tts: TTSService
    model: ScriptedChatModel
    deepgram: DeepgramFake
    llm_fake: LoopbackServer
    elevenlabs: ElevenLabsFake
    exchanges: list[Exchange] = field(default_factory=list)

    @classmethod
    async def start(cls, scenario: Scenario, ledger: SpeechLedger, *, sample_rate: int,
                    llm: LoopbackLLM = "gemini") -> LoopbackServices:
        """Start the fakes for ``scenario`` and build the services."""
        from pipecat.services.deepgram.stt import DeepgramSTTService
        from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

        exchanges: list[Exchange] = []
        model = ScriptedChatModel(scenario.model)

        def on_words(context_id: str, words: list[SynthesizedWord]) -> None:
            ledger.words.setdefault(context_id, []).extend(SpokenWord(w.word, w.start, w.end) for w in words)
            end = max(ledger.synthesized_secs.get(context_id, 0.0), words[-1].end if words else 0.0)
            ledger.synthesized_secs[context_id] = end

        record = exchanges.append
        deepgram = await DeepgramFake(on_exchange=record).start()
        elevenlabs = await ElevenLabsFake(words_per_minute=scenario.tts.words_per_minute, on_words=on_words,
                                          first_audio_secs=scenario.tts.first_audio_secs, on_exchange=record).start()
        system = scenario.model.system
        llm_fake: LoopbackServer
        llm_service: LLMService[Any]
        if llm == "openai":
            from pipecat.services.openai.llm import OpenAILLMService

            llm_fake = openai_fake = await OpenAIChatFake(model, server="openai", on_exchange=record).start()
            settings = OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction=system)
            llm_service = OpenAILLMService(api_key=_KEY, base_url=openai_fake.base_url, settings=settings)
        else:
            from pipecat.services.google.llm import GoogleLLMService

            llm_fake = gemini_fake = await GeminiFake(model, on_exchange=record).start()
            settings_g = GoogleLLMService.Settings(system_instruction=system)
            llm_service = GoogleLLMService(api_key=_KEY, http_options=gemini_fake.http_options(), settings=settings_g)
        stt = DeepgramSTTService(api_key=_KEY, base_url=deepgram.base_url, sample_rate=sample_rate)
        voice = ElevenLabsTTSService.Settings(voice="loopback")
        tts = ElevenLabsTTSService(api_key=_KEY, url=elevenlabs.url, sample_rate=sample_rate, settings=voice)
        return cls(stt, llm_service, tts, model, deepgram, llm_fake, elevenlabs, exchanges)

    async def stop(self) -> None:
        """Stop every fake."""
        for fake in (self.deepgram, self.llm_fake, self.elevenlabs):
            await fake.stop()


async def simulate_call(scenario: Scenario, config: HarnessConfig, *, workdir: Path, trace_path: Path | None,
                        call_id: str | None = None, use_harness: bool = True, observers: Sequence[BaseObserver] = (),
                        services: SimServices = "scripted", audio: AudioMode | None = None,
                        model: ModelArm | None = None, goal_caller: GoalCallerSettings | None = None) -> CallResult:
    """Run one scenario on the running (virtual-time) loop and check its expectations.

    Args:
        scenario: The scenario.
        config: The harness configuration.
        workdir: Where the call's business database is created.
        trace_path: JSONL timeline to write (``None``: no trace).
        call_id: Call identifier (default: the scenario name).
        use_harness: ``False``: the same pipeline with no control built or placed and no trace (a baseline).
        observers: Extra observers for the worker.
        services: ``scripted`` (the simulator's own LLM and TTS, injected transcripts) or ``loopback`` /
            ``loopback-openai`` (the bots' Deepgram, Gemini or OpenAI, and ElevenLabs services against the fakes).
        audio: Voice the caller with Piper, recognise it with Silero VAD and Whisper (scripted services only).
        model: A real model instead of the scripted one (the bots' Pipecat LLM service); scripted TTS and caller.
        goal_caller: How a ``caller_goal`` is played (default: the offline brain, seed 0, no cache).

    Raises:
        ValueError: ``audio`` with loopback services or a real model, or a goal caller on audio.
    """
    if audio is not None and (services != "scripted" or model is not None or scenario.caller_goal is not None):
        raise ValueError("audio mode runs a scripted caller with the scripted services; the loopback services bring "
                         "their own STT")
    if model is not None and services != "scripted":
        raise ValueError("a real model runs with the scripted TTS and caller frames, not the loopback services")
    wall_started = time.perf_counter()
    loop = asyncio.get_running_loop()
    started = loop.time()
    db = await create_database(scenario, workdir)
    own = ScenarioTools(scenario, db, with_retail=False)
    config = scenario_config(scenario, config)
    if not use_harness:  # a baseline builds no control at all, not controls left unplaced
        config, trace_path = config.only(), None
    about: dict[str, Any] = {"scenario": scenario.name, "description": scenario.description}
    about.update(control=scenario.control, simulated=True, **({"model": model.to_dict()} if model is not None else {}))
    trace = config.trace.model_copy(update={"enabled": trace_path is not None})
    harness = Harness(config.model_copy(update={"trace": trace}), call_id=call_id or scenario.name,
                      trace_path=trace_path, trace_metadata=about,
                      write_tools=RETAIL_WRITE_TOOLS | CALLBACK_WRITE_TOOLS | own.write_tools)
    ledger = SpeechLedger()
    executions: dict[str, int] = {}
    stop = audio.stop_strategy() if audio is not None else SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
    loopback: LoopbackServices | None = None
    if services == "scripted":
        llm: Any = (model.build_service(scenario.model.system) if model is not None
                    else ScriptedLLMService(scenario.model, system_instruction=scenario.model.system))
        tts: Any = SimulatedTTSService(ledger=ledger, sample_rate=_SAMPLE_RATE, **scenario.tts.model_dump())
        source: list[Any] = audio.front_end(scenario) if audio is not None else []
    else:
        provider: LoopbackLLM = "openai" if services == "loopback-openai" else "gemini"
        loopback = await LoopbackServices.start(scenario, ledger, sample_rate=_SAMPLE_RATE, llm=provider)
        llm, tts, source = loopback.llm, loopback.tts, [loopback.stt]
    meter = ModelMeter(llm, hold_time=model is not None)
    line: dict[str, Any] = {"recogniser": loopback.deepgram if loopback else None, "sample_rate": _SAMPLE_RATE}
    caller: SimulatedCaller
    if scenario.caller_goal is not None:
        settings = goal_caller or GoalCallerSettings()
        caller = await GoalCaller.start(scenario.caller_goal, scenario.name, scenario.caller_voice, settings, **line)
    elif audio is not None:
        caller = audio.caller(scenario)
    else:
        caller = SimulatedCaller(scenario.caller, scenario.caller_voice, **line)
    built = build_call_pipeline(
        harness=harness if use_harness else None, llm=llm, tts=tts, tools=RetailTools(db), source=source,
        output=SimulatedOutputTransport(ledger=ledger, sample_rate=_SAMPLE_RATE),
        user_params=LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[stop])),
        wrap_handler=fault_wrapper(scenario.faults, executions), extra_tools=[*await tool_sets(scenario, db), own],
        extra_write_tools=CALLBACK_WRITE_TOOLS | own.write_tools)
    context = built.context
    params = PipelineParams(audio_out_sample_rate=_SAMPLE_RATE, audio_in_sample_rate=_SAMPLE_RATE,
                            enable_usage_metrics=True)
    worker = PipelineWorker(Pipeline(built.processors), params=params, clock=LoopClock(), enable_rtvi=False,
                            observers=[caller, meter, *harness.observers(), *observers], idle_timeout_secs=None)
    from pipecat.frames.frames import LLMRunFrame, STTMetadataFrame

    if (p99 := scenario.caller_voice.stt_p99_secs) is not None:
        await worker.queue_frame(STTMetadataFrame(service_name="SimulatedSTT", ttfs_p99_latency=p99))
    await worker.queue_frame(LLMRunFrame())
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    timed_out = False

    async def play() -> None:
        try:
            await caller.run(worker)
        except Exception:
            # A caller that cannot go on (its caller model unreachable) ends the call instead of leaving it open.
            await worker.cancel(reason="the simulated caller failed")
            raise

    try:
        await asyncio.wait_for(asyncio.gather(runner.run(), play()), scenario.max_call_secs)
    except TimeoutError:
        timed_out = True
        await worker.cancel(reason="simulated call exceeded max_call_secs")
    finally:
        if loopback is not None:
            await loopback.stop()
        if isinstance(caller, GoalCaller):
            await caller.stop()

    checks = await check_state(scenario, db, caller, timed_out)
    playback = measure_playback(ledger, context_messages(context), call_ended=timed_out)
    calls = (loopback.model.sync() if loopback is not None
             else llm.calls if isinstance(llm, ScriptedLLMService) else meter.calls)
    checks.extend(check_history(scenario, playback, calls))
    # On loopback the fake's scripted model answers Pipecat's summarisation requests, not the service.
    checks.extend(check_context(scenario, context, loopback.model if loopback is not None else llm))
    result = CallResult(
        scenario=scenario.name, passed=all(c.ok for c in checks),
        # A real model's outcome is measured, not predicted: each arm is expected to pass.
        expected=scenario.expected_outcome(harness.active_controls) if model is None else "pass",
        checks=checks, active_controls=harness.active_controls, decisions=harness.decisions.decisions,
        playback=playback, trace_path=trace_path, virtual_secs=loop.time() - started,
        wall_secs=time.perf_counter() - wall_started, caller_completed=caller.completed,
        model_replies=[c.text.strip() for c in calls if c.text.strip()], tool_executions=dict(executions),
        write_tools=frozenset(harness.write_tools), model_usage=meter.usage,
        caller_requests=caller.requests if isinstance(caller, GoalCaller) else 0)
    recorder = harness.recorder
    if recorder is not None:
        for entry in caller.log:
            recorder.add("caller", entry["event"], **{k: v for k, v in entry.items() if k != "event"})
        # What each provider received and sent, beside the universal context the model lane shows.
        for exchange in loopback.exchanges if loopback is not None else []:
            lane = _PROVIDER_LANES.get(exchange.provider, "call")
            event = f"{exchange.provider}_{exchange.direction}"
            recorder.add(lane, event, t=exchange.t - started, message=exchange.kind, payload=exchange.payload)
        for turn in playback:
            recorder.add("bot", "turn_playback", t=loop.time() - started, **turn.to_dict())
        recorder.add("call", "call_result", t=loop.time() - started, outcome=result.outcome, expected=result.expected,
                     as_expected=result.as_expected, active_controls=sorted(result.active_controls),
                     checks=[{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
                     final_messages=context.get_messages(), tool_executions=executions,
                     model_usage=result.model_usage.__dict__)
    harness.close()
    return result


def run_scenario(scenario: Scenario, config: HarnessConfig | None = None, *, controls: Iterable[str] | None = None,
                 trace_dir: str | Path | None = None, max_wall_secs: float = 120.0, use_harness: bool = True,
                 observers: Sequence[BaseObserver] = (), services: SimServices = "scripted",
                 audio: AudioMode | None = None, model: ModelArm | None = None,
                 goal_caller: GoalCallerSettings | None = None) -> CallResult:
    """Run one scenario on its own virtual-time loop and return the result.

    ``config`` defaults to the scenario domain's preset; ``controls``, if given, are exactly the ones enabled;
    ``trace_dir`` receives the JSONL timeline; ``max_wall_secs`` guards against a stuck simulation. The other options
    are :func:`simulate_call`'s.
    """
    config = config or HarnessConfig.preset(scenario.domain)
    if controls is not None:
        config = config.only(*controls)
    trace_path = Path(trace_dir) / f"{scenario.name}.jsonl" if trace_dir is not None else None
    # Audio inference and a remote model's requests take wall time the virtual clock does not.
    remote = audio is not None or model is not None or (goal_caller is not None and goal_caller.model is not None)
    with tempfile.TemporaryDirectory(prefix="pipecat-harness-sim-") as tmp:
        call = simulate_call(scenario, config, workdir=Path(tmp), trace_path=trace_path, use_harness=use_harness,
                             observers=observers, services=services, audio=audio, model=model, goal_caller=goal_caller)
        wall = max(max_wall_secs, 900.0) if remote else max_wall_secs
        return run_on_virtual_time(call, max_virtual_secs=scenario.max_call_secs + 120.0, max_wall_secs=wall)
