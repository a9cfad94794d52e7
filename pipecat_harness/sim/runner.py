"""Run a scenario as a complete call through a real Pipecat ``PipelineWorker``, on virtual time.

The pipeline is a bot's minus the network: caller frames are injected at their times, Pipecat's own strategies decide
turns, the scripted LLM calls tools through Pipecat's function calling against a real SQLite database, and the simulated
TTS and transport play audio of realistic length on the loop's clock, so barge-ins land mid-sentence. The model may be a
real one (:mod:`~pipecat_harness.sim.model_arm`), the caller one played from a goal (:mod:`~.goal_caller`).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregatorParams
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from pipecat_harness.config import HarnessConfig
from pipecat_harness.demo.call_pipeline import build_call_pipeline
from pipecat_harness.demo.callbacks import CALLBACK_WRITE_TOOLS
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools
from pipecat_harness.harness import Harness
from pipecat_harness.sim.call_checks import check_context, check_history, check_state
from pipecat_harness.sim.call_result import CallResult, CheckResult, ModelUsage
from pipecat_harness.sim.call_setup import create_database, fault_wrapper, scenario_config, tool_sets
from pipecat_harness.sim.caller import SimulatedCaller
from pipecat_harness.sim.clock import LoopClock, run_on_virtual_time
from pipecat_harness.sim.goal_caller import GoalCaller, GoalCallerSettings
from pipecat_harness.sim.history_metrics import measure_playback
from pipecat_harness.sim.loopback import LoopbackLLM, LoopbackServices
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.model_meter import ModelMeter
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.sim.scenario_tools import ScenarioTools
from pipecat_harness.sim.scripted_llm import ScriptedLLMService, context_messages
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService, SpeechLedger

if TYPE_CHECKING:
    from pipecat_harness.sim.audio.mode import AudioMode

__all__ = ["SIM_SERVICES", "CallResult", "CheckResult", "ModelUsage", "SimServices", "run_scenario", "scenario_config",
           "simulate_call"]  # fmt: skip

SimServices = Literal["scripted", "loopback", "loopback-openai"]
SIM_SERVICES: tuple[str, ...] = ("scripted", "loopback", "loopback-openai")

_SAMPLE_RATE = 16000
_PROVIDER_LANES = {"gemini": "model", "openai": "model", "elevenlabs": "bot", "deepgram": "caller"}


async def simulate_call(
    scenario: Scenario,
    config: HarnessConfig,
    *,
    workdir: Path,
    trace_path: Path | None,
    call_id: str | None = None,
    use_harness: bool = True,
    observers: Sequence[BaseObserver] = (),
    services: SimServices = "scripted",
    audio: AudioMode | None = None,
    model: ModelArm | None = None,
    goal_caller: GoalCallerSettings | None = None,
) -> CallResult:
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
        raise ValueError(
            "audio mode runs a scripted caller with the scripted services; the loopback services bring their own STT"
        )
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
    harness = Harness(
        config.model_copy(update={"trace": config.trace.model_copy(update={"enabled": trace_path is not None})}),
        call_id=call_id or scenario.name,
        trace_path=trace_path,
        trace_metadata=about,
        write_tools=RETAIL_WRITE_TOOLS | CALLBACK_WRITE_TOOLS | own.write_tools,
    )
    ledger = SpeechLedger()
    executions: dict[str, int] = {}
    stop = audio.stop_strategy() if audio is not None else SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
    loopback: LoopbackServices | None = None
    if services == "scripted":
        if model is not None:
            llm: Any = model.build_service(scenario.model.system)
        else:
            llm = ScriptedLLMService(scenario.model, system_instruction=scenario.model.system)
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
        harness=harness if use_harness else None,
        llm=llm,
        tts=tts,
        tools=RetailTools(db),
        source=source,
        output=SimulatedOutputTransport(ledger=ledger, sample_rate=_SAMPLE_RATE),
        user_params=LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[stop])),
        wrap_handler=fault_wrapper(scenario.faults, executions),
        extra_tools=[*await tool_sets(scenario, db), own],
        extra_write_tools=CALLBACK_WRITE_TOOLS | own.write_tools,
    )
    context = built.context
    params = PipelineParams(
        audio_out_sample_rate=_SAMPLE_RATE, audio_in_sample_rate=_SAMPLE_RATE, enable_usage_metrics=True
    )
    worker = PipelineWorker(
        Pipeline(built.processors),
        params=params,
        observers=[caller, meter, *harness.observers(), *observers],
        clock=LoopClock(),
        enable_rtvi=False,
        idle_timeout_secs=None,
    )
    from pipecat.frames.frames import LLMRunFrame, STTMetadataFrame

    if scenario.caller_voice.stt_p99_secs is not None:
        p99 = scenario.caller_voice.stt_p99_secs
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
    if isinstance(llm, ScriptedLLMService):
        calls = llm.calls
    else:
        calls = loopback.model_calls() if loopback is not None else meter.calls
    checks.extend(check_history(scenario, playback, calls))
    # On loopback the fake's scripted model answers Pipecat's summarisation requests, not the service.
    checks.extend(check_context(scenario, context, loopback.model if loopback is not None else llm))
    result = CallResult(
        scenario=scenario.name,
        passed=all(c.ok for c in checks),
        # A real model's outcome is measured, not predicted: each arm is expected to pass.
        expected=scenario.expected_outcome(harness.active_controls) if model is None else "pass",
        checks=checks,
        active_controls=harness.active_controls,
        decisions=harness.decisions.decisions,
        playback=playback,
        trace_path=trace_path,
        virtual_secs=loop.time() - started,
        wall_secs=time.perf_counter() - wall_started,
        caller_completed=caller.completed,
        model_replies=[c.text.strip() for c in calls if c.text.strip()],
        tool_executions=dict(executions),
        write_tools=frozenset(harness.write_tools),
        model_usage=meter.usage,
        caller_requests=caller.requests if isinstance(caller, GoalCaller) else 0,
    )
    recorder = harness.recorder
    if recorder is not None:
        for entry in caller.log:
            said = {"said": entry["said"]} if "said" in entry else {}
            recorder.add("caller", entry["event"], t=entry["t"], turn=entry["turn"], **said)
        # What each provider received and sent, beside the universal context the model lane shows.
        for exchange in loopback.exchanges if loopback is not None else []:
            lane = _PROVIDER_LANES.get(exchange.provider, "call")
            event = f"{exchange.provider}_{exchange.direction}"
            recorder.add(lane, event, t=exchange.t - started, message=exchange.kind, payload=exchange.payload)
        for turn in playback:
            recorder.add("bot", "turn_playback", t=loop.time() - started, **turn.to_dict())
        recorder.add(
            "call",
            "call_result",
            t=loop.time() - started,
            outcome=result.outcome,
            expected=result.expected,
            as_expected=result.as_expected,
            active_controls=sorted(result.active_controls),
            checks=[{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
            final_messages=context.get_messages(),
            tool_executions=executions,
            model_usage=result.model_usage.__dict__,
        )
    harness.close()
    return result


def run_scenario(
    scenario: Scenario,
    config: HarnessConfig | None = None,
    *,
    controls: Iterable[str] | None = None,
    trace_dir: str | Path | None = None,
    max_wall_secs: float = 120.0,
    use_harness: bool = True,
    observers: Sequence[BaseObserver] = (),
    services: SimServices = "scripted",
    audio: AudioMode | None = None,
    model: ModelArm | None = None,
    goal_caller: GoalCallerSettings | None = None,
) -> CallResult:
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
        call = simulate_call(
            scenario,
            config,
            workdir=Path(tmp),
            trace_path=trace_path,
            use_harness=use_harness,
            observers=observers,
            services=services,
            audio=audio,
            model=model,
            goal_caller=goal_caller,
        )
        wall = max(max_wall_secs, 900.0) if remote else max_wall_secs
        return run_on_virtual_time(call, max_virtual_secs=scenario.max_call_secs + 120.0, max_wall_secs=wall)
