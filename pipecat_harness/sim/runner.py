"""Run a scenario as a complete call through a real Pipecat ``PipelineWorker``.

The pipeline is the one a bot would run, minus the network: caller frames
(VAD and transcripts) are injected at their times, the user aggregator decides
turns with Pipecat's own strategies, the scripted LLM calls tools through
Pipecat's function-calling path against a real SQLite business database, the
simulated TTS produces audio of realistic length, and the simulated transport
plays it on the clock so barge-ins land mid-sentence. The harness, built from
a :class:`HarnessConfig`, places its controls as it would in production.

Everything runs on a virtual-time event loop (see :mod:`pipecat_harness.sim.clock`):
the same frame order and relative timing as real time, in a fraction of it.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregatorParams
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner
from pydantic import BaseModel, ValidationError

from pipecat_harness.config import HarnessConfig
from pipecat_harness.decisions import ControlDecision
from pipecat_harness.demo.call_pipeline import build_call_pipeline
from pipecat_harness.demo.callbacks import CALLBACK_WRITE_TOOLS, CallbackTools
from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, ToolHandler
from pipecat_harness.harness import Harness
from pipecat_harness.sim.caller import SimulatedCaller
from pipecat_harness.sim.clock import LoopClock, virtual_time
from pipecat_harness.sim.history_metrics import TurnPlayback, measure_playback
from pipecat_harness.sim.loopback import LoopbackServices
from pipecat_harness.sim.scenario import Scenario, ScenarioError, ToolFault
from pipecat_harness.sim.scenario_tools import ScenarioTools, create_tables
from pipecat_harness.sim.scripted_llm import ModelCall, ScriptedLLMService, context_messages
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService, SpeechLedger
from pipecat_harness.validation import describe_validation_error

if TYPE_CHECKING:
    from pipecat_harness.sim.audio.mode import AudioMode

__all__ = ["SIM_SERVICES", "CallResult", "CheckResult", "SimServices", "run_scenario", "run_scenarios", "simulate_call"]

SimServices = Literal["scripted", "loopback", "loopback-openai"]
SIM_SERVICES: tuple[str, ...] = ("scripted", "loopback", "loopback-openai")

_SAMPLE_RATE = 16000
_PROVIDER_LANES = {"gemini": "model", "openai": "model", "elevenlabs": "bot", "deepgram": "caller"}


@dataclass(frozen=True)
class CheckResult:
    """One expectation of a scenario and whether it held."""

    name: str
    ok: bool
    detail: str


@dataclass
class CallResult:
    """The outcome of one simulated call.

    Parameters:
        scenario: The scenario's name.
        passed: Whether every expectation held (the business outcome matched).
        expected: The outcome expected with the active controls (``pass``/``fail``).
        checks: Each expectation and whether it held.
        active_controls: Controls the harness built for the call.
        decisions: Every control decision taken.
        playback: Per assistant turn: generated, heard and retained words.
        trace_path: Where the timeline was written, if anywhere.
        virtual_secs: Length of the call in simulated time.
        wall_secs: Wall-clock time the simulation took.
        caller_completed: Whether the caller got through the whole script.
        model_replies: The text of every model reply, in order.
    """

    scenario: str
    passed: bool
    expected: str
    checks: list[CheckResult]
    active_controls: frozenset[str]
    decisions: list[ControlDecision]
    playback: list[TurnPlayback]
    trace_path: Path | None
    virtual_secs: float
    wall_secs: float
    caller_completed: bool
    model_replies: list[str] = field(default_factory=list)
    tool_executions: dict[str, int] = field(default_factory=dict)
    write_tools: frozenset[str] = frozenset()

    @property
    def outcome(self) -> str:
        """``pass`` or ``fail``."""
        return "pass" if self.passed else "fail"

    @property
    def as_expected(self) -> bool:
        """Whether the outcome is the one the scenario states for the active controls."""
        return self.outcome == self.expected


def _fault_wrapper(faults: list[ToolFault], counts: dict[str, int]) -> Callable[[str, ToolHandler], ToolHandler]:
    """Wrap business handlers so scripted backend faults happen under the tool layer."""

    def wrap(name: str, handler: ToolHandler) -> ToolHandler:
        async def call(arguments: Mapping[str, Any]) -> Any:
            counts[name] = counts.get(name, 0) + 1
            occurrence = counts[name]
            fault = next((f for f in faults if f.tool == name and f.occurrence == occurrence), None)
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
) -> CallResult:
    """Run one scenario on the running (virtual-time) loop and check its expectations.

    Args:
        scenario: The scenario.
        config: The harness configuration.
        workdir: Where the call's business database is created.
        trace_path: JSONL timeline to write (``None``: no trace).
        call_id: Call identifier (default: the scenario name).
        use_harness: ``False`` runs the same pipeline with no harness at all (a baseline).
        observers: Extra observers for the worker.
        services: ``scripted`` (the simulator's own LLM and TTS, injected transcripts) or
            ``loopback`` / ``loopback-openai`` (the bots' Deepgram, Gemini or OpenAI, and
            ElevenLabs services against the protocol fakes).
        audio: Voice the caller with Piper and recognise it with Silero VAD and Whisper
            (``None``: the caller's transcript frames are injected directly). Scripted services only.

    Raises:
        ValueError: ``audio`` with loopback services.
    """
    if audio is not None and services != "scripted":
        raise ValueError("audio mode runs with the scripted services; the loopback services bring their own STT")
    wall_started = time.perf_counter()
    loop = asyncio.get_running_loop()
    started = loop.time()
    db = await _create_database(scenario, workdir)
    own = ScenarioTools(scenario, db, with_retail=False)
    config = scenario_config(scenario, config)
    harness = Harness(
        config.model_copy(update={"trace": config.trace.model_copy(update={"enabled": trace_path is not None})}),
        call_id=call_id or scenario.name,
        trace_path=trace_path,
        trace_metadata={"scenario": scenario.name, "description": scenario.description,
                        "control": scenario.control, "simulated": True},
        write_tools=RETAIL_WRITE_TOOLS | CALLBACK_WRITE_TOOLS | own.write_tools,
    )
    ledger = SpeechLedger()
    executions: dict[str, int] = {}
    tools = RetailTools(db)
    extra_tools = [*await _tool_sets(scenario, db), own]
    user_params = LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(stop=[
            audio.stop_strategy() if audio is not None else SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
        ])
    )
    loopback: LoopbackServices | None = None
    if services == "scripted":
        scripted = ScriptedLLMService(scenario.model, system_instruction=scenario.model.system)
        llm: Any = scripted
        tts: Any = SimulatedTTSService(
            word_timestamps=scenario.tts.word_timestamps, words_per_minute=scenario.tts.words_per_minute,
            first_audio_secs=scenario.tts.first_audio_secs, ledger=ledger, sample_rate=_SAMPLE_RATE,
        )
        source: list[Any] = audio.front_end() if audio is not None else []
        model_calls: Callable[[], list[ModelCall]] = lambda: scripted.calls  # noqa: E731
        summaries = scripted.summary_requests
    else:
        loopback = await LoopbackServices.start(scenario, ledger, sample_rate=_SAMPLE_RATE,
                                                llm="openai" if services == "loopback-openai" else "gemini")
        llm, tts, source, model_calls = loopback.llm, loopback.tts, [loopback.stt], loopback.model_calls
        summaries = loopback.model.summary_requests
    transport = SimulatedOutputTransport(ledger=ledger, sample_rate=_SAMPLE_RATE)
    caller = audio.caller(scenario) if audio is not None else SimulatedCaller(
        scenario.caller, scenario.caller_voice,
        recogniser=loopback.deepgram if loopback is not None else None, sample_rate=_SAMPLE_RATE)
    built = build_call_pipeline(
        harness=harness if use_harness else None, llm=llm, tts=tts, output=transport, tools=tools,
        user_params=user_params, source=source, wrap_handler=_fault_wrapper(scenario.faults, executions),
        extra_tools=extra_tools, extra_write_tools=CALLBACK_WRITE_TOOLS | own.write_tools,
    )
    context = built.context
    pipeline = Pipeline(built.processors)
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_out_sample_rate=_SAMPLE_RATE, audio_in_sample_rate=_SAMPLE_RATE),
        observers=[caller, *(harness.observers() if use_harness else []), *observers],
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
    try:
        await asyncio.wait_for(asyncio.gather(runner.run(), caller.run(worker)), scenario.max_call_secs)
    except TimeoutError:
        timed_out = True
        await worker.cancel(reason="simulated call exceeded max_call_secs")
    finally:
        if loopback is not None:
            await loopback.stop()

    checks = await _check(scenario, db, caller, timed_out)
    playback = measure_playback(ledger, context_messages(context))
    calls = model_calls()
    checks.extend(_check_history(scenario, playback, calls))
    checks.extend(_check_context(scenario, context, summaries))
    passed = all(c.ok for c in checks)
    result = CallResult(
        scenario=scenario.name,
        passed=passed,
        expected=scenario.expected_outcome(harness.active_controls),
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
    )
    if harness.recorder is not None and use_harness:
        for entry in caller.log:
            harness.recorder.add("caller", entry["event"], t=entry["t"], turn=entry["turn"])
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
        )
    harness.close()
    return result


def _check_context(scenario: Scenario, context: Any, summary_requests: Sequence[Any]) -> list[CheckResult]:
    spec = scenario.expect.context
    if spec is None:
        return []
    from pipecat_harness.business.context_budget import estimate_tokens

    messages = [m for m in context.get_messages() if isinstance(m, dict)]
    texts = [str(m.get("content", "")) for m in messages]
    checks = []
    for pattern in spec.contains:
        found = any(re.search(pattern, text) for text in texts)
        checks.append(CheckResult(f"context contains {pattern!r}", found,
                                  "present in the final context" if found else "missing from the final context"))
    if spec.max_tokens is not None:
        tokens = estimate_tokens(messages)
        checks.append(CheckResult("context budget", tokens <= spec.max_tokens,
                                  f"{tokens} tokens at the end (budget {spec.max_tokens})"))
    if spec.summarized:
        count = len(summary_requests)
        checks.append(CheckResult("context summarised", count > 0, f"{count} summaries requested"))
    return checks


def scenario_config(scenario: Scenario, config: HarnessConfig) -> HarnessConfig:
    """``config`` with the scenario's own settings applied (its switches stay as given).

    Raises:
        ScenarioError: A block or setting does not exist or has a bad value.
    """
    update = {}
    for block, values in scenario.harness.items():
        current = getattr(config, block, None)
        if not isinstance(current, BaseModel) or not isinstance(values, dict):
            raise ScenarioError(f"{scenario.source or scenario.name}: field 'harness.{block}' is not a settings block")
        settings = {k: v for k, v in values.items() if k != "enabled"}
        try:
            update[block] = type(current).model_validate({**current.model_dump(), **settings})
        except ValidationError as exc:
            raise ScenarioError(f"{scenario.source or scenario.name}: harness.{block}: "
                                f"{describe_validation_error(exc)}") from exc
    return config.model_copy(update=update) if update else config


async def _tool_sets(scenario: Scenario, db: RetailDatabase) -> list[Any]:
    """The demo tool sets the scenario adds to the retail tools."""
    extra: list[Any] = []
    for name in scenario.tools:
        if name == "callbacks":
            extra.append(CallbackTools(db))
        elif name == "policies":
            from pipecat_harness.demo.policies import PolicyTools

            extra.append(await PolicyTools.create())
    return extra


async def _create_database(scenario: Scenario, workdir: Path) -> RetailDatabase:
    """The call's business database: the named seed, the scenario's own tables, then its statements one by one.

    Raises:
        ScenarioError: A table or a statement of ``database.sql`` fails; the message names it.
    """
    path = workdir / f"{scenario.name}.db"
    # The empty seed is an empty database: the scenario's own tables may reuse the retail names.
    db = await RetailDatabase.create(path, seed=None) if scenario.database.seed == "retail" else RetailDatabase(path)
    await create_tables(scenario, db)
    for index, statement in enumerate(scenario.database.sql):
        try:
            await db.execute(statement)
        except Exception as exc:  # sqlite3 errors: the scenario's SQL is wrong, not the simulator
            raise ScenarioError(
                f"{scenario.source or scenario.name}: field 'database.sql[{index}]': the statement failed "
                f"({exc}); fix it against the {scenario.database.seed!r} schema"
            ) from exc
    return db


async def _check(scenario: Scenario, db: RetailDatabase, caller: SimulatedCaller, timed_out: bool) -> list[CheckResult]:
    checks = []
    for check in scenario.expect.state:
        try:
            value = await db.scalar(check.sql)
        except Exception as exc:  # a broken expectation query is a failed check, not a crash
            checks.append(CheckResult(f"state: {check.sql}", False, f"query failed: {exc}"))
            continue
        ok = _equal(value, check.equals)
        detail = f"got {value!r}, expected {check.equals!r}" + (f" ({check.why})" if check.why else "")
        checks.append(CheckResult(f"state: {check.sql}", ok, detail))
    if scenario.expect.caller_completed:
        detail = "caller finished the script" if caller.completed else (
            f"caller gave up waiting before turn {caller.gave_up_at_turn}" if caller.gave_up_at_turn is not None
            else "call did not finish")
        checks.append(CheckResult("caller completed", caller.completed, detail))
    if timed_out:
        checks.append(CheckResult("call ended", False, f"exceeded max_call_secs={scenario.max_call_secs}"))
    return checks


def _check_history(scenario: Scenario, playback: list[TurnPlayback], calls: list[ModelCall]) -> list[CheckResult]:
    spec = scenario.expect.history
    checks = []
    if spec.max_unplayed_words is not None:
        worst = max((t.unplayed_retained for t in playback), default=0)
        checks.append(CheckResult("history: unplayed words retained", worst <= spec.max_unplayed_words,
                                  f"at most {worst} per turn (limit {spec.max_unplayed_words})"))
    if spec.max_removed_words is not None:
        worst = max((t.played_removed for t in playback), default=0)
        checks.append(CheckResult("history: played words removed", worst <= spec.max_removed_words,
                                  f"at most {worst} per turn (limit {spec.max_removed_words})"))
    if spec.max_repeated_replies is not None:
        replies = [" ".join(c.text.lower().split()) for c in calls if c.text.strip()]
        repeats = sum(1 for i, r in enumerate(replies) if r in replies[:i])
        checks.append(CheckResult("history: repeated replies", repeats <= spec.max_repeated_replies,
                                  f"{repeats} repeated (limit {spec.max_repeated_replies})"))
    return checks


def _equal(value: Any, expected: Any) -> bool:
    if isinstance(value, (int, float)) and isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return abs(float(value) - float(expected)) < 1e-6
    return value == expected or str(value) == str(expected)


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
) -> CallResult:
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
    """
    config = config or HarnessConfig.preset(scenario.domain)
    if controls is not None:
        config = config.only(*controls)
    trace_path = Path(trace_dir) / f"{scenario.name}.jsonl" if trace_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="pipecat-harness-sim-") as tmp:
        return _run_on_virtual_loop(
            simulate_call(scenario, config, workdir=Path(tmp), trace_path=trace_path, use_harness=use_harness,
                          observers=observers, services=services, audio=audio),
            max_virtual_secs=scenario.max_call_secs + 120.0,
            max_wall_secs=max_wall_secs if audio is None else max(max_wall_secs, 900.0),
        )


def run_scenarios(
    scenarios: Iterable[Scenario],
    config: HarnessConfig | None = None,
    *,
    controls: Iterable[str] | None = None,
    trace_dir: str | Path | None = None,
    services: SimServices = "scripted",
) -> list[CallResult]:
    """Run several scenarios one after another."""
    control_list = list(controls) if controls is not None else None
    return [run_scenario(s, config, controls=control_list, trace_dir=trace_dir, services=services)
            for s in scenarios]


def _run_on_virtual_loop(coro: Awaitable[CallResult], *, max_virtual_secs: float, max_wall_secs: float) -> CallResult:
    with virtual_time(max_virtual_secs=max_virtual_secs, max_wall_secs=max_wall_secs) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(coro)  # type: ignore[arg-type]
