"""Run a scenario as a complete call through a real Pipecat ``PipelineWorker``.

The pipeline is the one a bot would run, minus the network: caller frames (VAD and transcripts) are injected at their
times, the user aggregator decides turns with Pipecat's own strategies, the scripted LLM calls tools through Pipecat's
function-calling path against a real SQLite business database, the simulated TTS produces audio of realistic length, and
the simulated transport plays it on the clock so barge-ins land mid-sentence. The harness, built from a
:class:`HarnessConfig`, places its controls as it would in production.

Everything runs on a virtual-time event loop (see :mod:`pipecat_harness.sim.clock`): the same frame order and relative
timing as real time, in a fraction of it.

The model may instead be a real one through the bots' Pipecat service (:mod:`pipecat_harness.sim.model_arm`), and the
caller one described by goal and played by an LLM caller (:mod:`pipecat_harness.sim.goal_caller`). How the call is set
up, what it produced and how its expectations are checked live in ``call_setup``, ``call_result`` and ``call_checks``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
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
from pipecat_harness.sim.clock import LoopClock, virtual_time
from pipecat_harness.sim.goal_caller import GoalCaller, GoalCallerSettings
from pipecat_harness.sim.history_metrics import measure_playback
from pipecat_harness.sim.loopback import LoopbackServices
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.model_meter import ModelMeter
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.sim.scenario_tools import ScenarioTools
from pipecat_harness.sim.scripted_llm import ModelCall, ScriptedLLMService, context_messages
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService, SpeechLedger

if TYPE_CHECKING:
    from pipecat_harness.sim.audio.mode import AudioMode

__all__ = [
    "SIM_SERVICES",
    "CallResult",
    "CheckResult",
    "ModelUsage",
    "SimServices",
    "run_scenario",
    "scenario_config",
    "simulate_call",
]

SimServices = Literal["scripted", "loopback", "loopback-openai"]
SIM_SERVICES: tuple[str, ...] = ("scripted", "loopback", "loopback-openai")

_SAMPLE_RATE = 16000
_PROVIDER_LANES = {"gemini": "model", "openai": "model", "elevenlabs": "bot", "deepgram": "caller"}


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
            ``loopback-openai`` (the bots' Deepgram, Gemini or OpenAI, and ElevenLabs services against the protocol
            fakes).
        audio: Voice the caller with Piper and recognise it with Silero VAD and Whisper (``None``: the caller's
            transcript frames are injected directly). Scripted services only.
        model: A real model answering instead of the scenario's scripted one (the bots' Pipecat LLM service, see
            :mod:`pipecat_harness.sim.model_arm`); scripted TTS and caller frames.
        goal_caller: How a ``caller_goal`` is played (default: the offline brain, seed 0, no cache).

    Raises:
        ValueError: ``audio`` with loopback services or a real model, or a goal caller on audio.
    """
    if audio is not None and (services != "scripted" or model is not None or scenario.caller_goal is not None):
        raise ValueError("audio mode runs a scripted caller with the scripted services; the loopback services "
                         "bring their own STT")
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
    harness = Harness(
        config.model_copy(update={"trace": config.trace.model_copy(update={"enabled": trace_path is not None})}),
        call_id=call_id or scenario.name,
        trace_path=trace_path,
        trace_metadata={"scenario": scenario.name, "description": scenario.description,
                        "control": scenario.control, "simulated": True,
                        **({"model": model.to_dict()} if model is not None else {})},
        write_tools=RETAIL_WRITE_TOOLS | CALLBACK_WRITE_TOOLS | own.write_tools,
    )
    ledger = SpeechLedger()
    executions: dict[str, int] = {}
    tools = RetailTools(db)
    extra_tools = [*await tool_sets(scenario, db), own]
    user_params = LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(stop=[
            audio.stop_strategy() if audio is not None else SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
        ])
    )
    loopback: LoopbackServices | None = None
    scripted: ScriptedLLMService | None = None
    if services == "scripted":
        if model is not None:
            llm: Any = model.build_service(scenario.model.system)
        else:
            scripted = ScriptedLLMService(scenario.model, system_instruction=scenario.model.system)
            llm = scripted
        tts: Any = SimulatedTTSService(
            word_timestamps=scenario.tts.word_timestamps, words_per_minute=scenario.tts.words_per_minute,
            first_audio_secs=scenario.tts.first_audio_secs, ledger=ledger, sample_rate=_SAMPLE_RATE,
        )
        source: list[Any] = audio.front_end(scenario) if audio is not None else []
    else:
        loopback = await LoopbackServices.start(scenario, ledger, sample_rate=_SAMPLE_RATE,
                                                llm="openai" if services == "loopback-openai" else "gemini")
        llm, tts, source = loopback.llm, loopback.tts, [loopback.stt]
    meter = ModelMeter(llm, hold_time=model is not None)
    model_calls: Callable[[], list[ModelCall]]
    if scripted is not None:
        model_calls = lambda: scripted.calls  # noqa: E731
    elif loopback is not None:
        model_calls = loopback.model_calls
    else:
        model_calls = lambda: meter.calls  # noqa: E731
    transport = SimulatedOutputTransport(ledger=ledger, sample_rate=_SAMPLE_RATE)
    recogniser = loopback.deepgram if loopback is not None else None
    caller: SimulatedCaller
    if scenario.caller_goal is not None:
        caller = await GoalCaller.start(scenario.caller_goal, scenario.name, scenario.caller_voice,
                                        goal_caller or GoalCallerSettings(), recogniser=recogniser,
                                        sample_rate=_SAMPLE_RATE)
    elif audio is not None:
        caller = audio.caller(scenario)
    else:
        caller = SimulatedCaller(scenario.caller, scenario.caller_voice, recogniser=recogniser,
                                 sample_rate=_SAMPLE_RATE)
    built = build_call_pipeline(
        harness=harness if use_harness else None, llm=llm, tts=tts, output=transport, tools=tools,
        user_params=user_params, source=source, wrap_handler=fault_wrapper(scenario.faults, executions),
        extra_tools=extra_tools, extra_write_tools=CALLBACK_WRITE_TOOLS | own.write_tools,
    )
    context = built.context
    pipeline = Pipeline(built.processors)
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_out_sample_rate=_SAMPLE_RATE, audio_in_sample_rate=_SAMPLE_RATE,
                              enable_usage_metrics=True),
        observers=[caller, meter, *harness.observers(), *observers],
        clock=LoopClock(),
        enable_rtvi=False,
        idle_timeout_secs=None,
    )
    from pipecat.frames.frames import LLMRunFrame, STTMetadataFrame

    if scenario.caller_voice.stt_p99_secs is not None:
        await worker.queue_frame(STTMetadataFrame(service_name="SimulatedSTT",
                                                  ttfs_p99_latency=scenario.caller_voice.stt_p99_secs))
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
    calls = model_calls()
    checks.extend(check_history(scenario, playback, calls))
    # On loopback the fake's scripted model answers Pipecat's summarisation requests, not the service.
    checks.extend(check_context(scenario, context, loopback.model if loopback is not None else llm))
    passed = all(c.ok for c in checks)
    usage = meter.usage
    result = CallResult(
        scenario=scenario.name,
        passed=passed,
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
        model_usage=usage,
        caller_requests=caller.requests if isinstance(caller, GoalCaller) else 0,
    )
    if harness.recorder is not None:
        for entry in caller.log:
            harness.recorder.add("caller", entry["event"], t=entry["t"], turn=entry["turn"],
                                 **({"said": entry["said"]} if "said" in entry else {}))
        if loopback is not None:
            # What each provider received and sent, beside the universal context the model lane shows.
            for exchange in loopback.exchanges:
                lane = _PROVIDER_LANES.get(exchange.provider, "call")
                harness.recorder.add(lane, f"{exchange.provider}_{exchange.direction}", t=exchange.t - started,
                                     message=exchange.kind, payload=exchange.payload)
        for turn in playback:
            harness.recorder.add("bot", "turn_playback", t=loop.time() - started, **turn.to_dict())
        harness.recorder.add(
            "call", "call_result", t=loop.time() - started, outcome=result.outcome, expected=result.expected,
            as_expected=result.as_expected, active_controls=sorted(result.active_controls),
            checks=[{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
            final_messages=context.get_messages(), tool_executions=executions,
            model_usage=usage.__dict__,
        )
    harness.close()
    return result


def run_scenario(scenario: Scenario, config: HarnessConfig | None = None, *, controls: Iterable[str] | None = None,
                 trace_dir: str | Path | None = None, max_wall_secs: float = 120.0, use_harness: bool = True,
                 observers: Sequence[BaseObserver] = (), services: SimServices = "scripted",
                 audio: AudioMode | None = None, model: ModelArm | None = None,
                 goal_caller: GoalCallerSettings | None = None) -> CallResult:
    """Run one scenario on its own virtual-time loop and return the result.

    Args:
        scenario: The scenario to run.
        config: Harness configuration (default: the scenario domain's preset).
        controls: If given, exactly these controls are enabled.
        trace_dir: Directory for the JSONL timeline (none written when omitted).
        max_wall_secs: Wall-clock budget (a guard against a stuck simulation).
        use_harness: ``False`` runs the same pipeline without the harness (a baseline).
        observers: Extra observers for the worker (they see every frame of the call).
        services: ``scripted``, ``loopback`` or ``loopback-openai`` (see :func:`simulate_call`).
        audio: Run the call on audio (Piper, Silero VAD, Whisper tiny.en); ``None`` for text mode.
        model: A real model instead of the scripted one (see :func:`simulate_call`).
        goal_caller: How a ``caller_goal`` is played (caller model, seed, run, cache).
    """
    config = config or HarnessConfig.preset(scenario.domain)
    if controls is not None:
        config = config.only(*controls)
    trace_path = Path(trace_dir) / f"{scenario.name}.jsonl" if trace_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="pipecat-harness-sim-") as tmp:
        return _run_on_virtual_loop(
            simulate_call(scenario, config, workdir=Path(tmp), trace_path=trace_path, use_harness=use_harness,
                          observers=observers, services=services, audio=audio, model=model,
                          goal_caller=goal_caller),
            max_virtual_secs=scenario.max_call_secs + 120.0,
            # Audio inference and a remote model's requests take wall time the virtual clock does not.
            max_wall_secs=max_wall_secs if audio is None and model is None and (
                goal_caller is None or goal_caller.model is None) else max(max_wall_secs, 900.0),
        )


def _run_on_virtual_loop(coro: Awaitable[CallResult], *, max_virtual_secs: float, max_wall_secs: float) -> CallResult:
    with virtual_time(max_virtual_secs=max_virtual_secs, max_wall_secs=max_wall_secs) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(coro)  # type: ignore[arg-type]
