"""Run the A/B evaluation: every scenario with a control on and off, over seeded timing variants.

``on`` is the domain preset's enabled controls plus the control, ``off`` the same minus it (``all``: the preset against
none). Round ``r`` runs timing variant ``r``; after each round a control whose stop or sample rule is met gets no more
rounds, and a :class:`Budget` ends the run before a round that would exceed it. Identical calls are run once and shared.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pipecat_harness.config import CONTROL_NAMES, HarnessConfig
from pipecat_harness.eval.identifier_splits import InputWaiting
from pipecat_harness.eval.metrics import CallMetrics, HistoryFidelity
from pipecat_harness.eval.rules import DecisionRules, RuleVerdict, check_keep, check_sample, check_stop
from pipecat_harness.eval.summary import Comparison, compare_arms
from pipecat_harness.eval.tool_checks import ToolChecks
from pipecat_harness.eval.variation import vary_scenario
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.scenario import Scenario

__all__ = ["TOGGLES", "Budget", "CallJob", "ControlResult", "EvalRun", "arm_controls", "run_call",
           "run_evaluation"]

#: What ``--toggle`` accepts.
TOGGLES = (*CONTROL_NAMES, "all")


@dataclass(frozen=True)
class CallJob:
    """One simulated call to run: a scenario variant with a set of controls.

    Parameters:
        scenario: The scenario as written.
        run: Timing variant.
        seed: Evaluation seed.
        controls: Controls enabled for the call.
        trace_dir: Where its trace is written.
        audio_turn_stop: Run the call on audio with this stop strategy (``None``: text mode).
        services: ``scripted`` or ``loopback`` (the bots' services against the protocol fakes).
        model: A real model answering instead of the scripted one.
        caller_model: The model playing goal callers (``None``: the offline brain).
        caller_cache: Directory of the goal callers' cached lines.
    """

    scenario: Scenario
    run: int
    seed: int
    controls: tuple[str, ...]
    trace_dir: str
    audio_turn_stop: str | None = None
    services: str = "scripted"
    model: ModelArm | None = None
    caller_model: ModelArm | None = None
    caller_cache: str | None = None

    @property
    def key(self) -> tuple[str, int, tuple[str, ...]]:
        """Identity of the call: equal keys give identical calls."""
        return (self.scenario.name, self.run, self.controls)


def arm_controls(control: str, domain: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The controls of the ``on`` and ``off`` arms for a toggle in a domain."""
    preset = set(HarnessConfig.preset(domain).enabled_controls())  # type: ignore[arg-type]
    if control == "all":
        return tuple(sorted(preset)), ()
    if control not in CONTROL_NAMES:
        raise ValueError(f"unknown control {control!r}; choose from {', '.join(TOGGLES)}")
    return tuple(sorted(preset | {control})), tuple(sorted(preset - {control}))


def _arm_dir(controls: tuple[str, ...]) -> str:
    return "+".join(controls) if controls else "no_controls"


def _quiet_worker() -> None:
    """Pool initializer: a worker's Pipecat logs would interleave with the tables, so they stay off."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_HARNESS_LOG_LEVEL", "CRITICAL"))


def run_call(job: CallJob) -> CallMetrics:
    """Run one call and measure it (the unit of work of the process pool).

    A simulation that raises is returned as a failed call with its error, so one broken scenario cannot take the
    evaluation down.
    """
    from pipecat_harness.eval.metrics import measure_call
    from pipecat_harness.sim.goal_caller import GoalCallerSettings
    from pipecat_harness.sim.runner import run_scenario
    from pipecat_harness.trace.timeline import Timeline

    variant = vary_scenario(job.scenario, job.run, seed=job.seed)
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            audio = None
            if job.audio_turn_stop is not None:
                from pipecat_harness.sim.audio.mode import AudioMode

                audio = AudioMode(turn_stop=job.audio_turn_stop)  # type: ignore[arg-type]
            goal_caller = GoalCallerSettings(job.caller_model, job.seed, job.run, job.caller_cache)
            result = run_scenario(variant, controls=list(job.controls), trace_dir=job.trace_dir,
                                  services=job.services, audio=audio,  # type: ignore[arg-type]
                                  model=job.model, goal_caller=goal_caller)
        timeline = Timeline.load(result.trace_path) if result.trace_path else Timeline([])
        return measure_call(variant, result, timeline, arm="", run=job.run)
    except Exception as exc:  # a broken scenario is a failed call, reported with its reason
        return CallMetrics(scenario=variant.name, domain=variant.domain, arm="", run=job.run,
                           controls=list(job.controls), passed=False, expected="pass",
                           stay_out_of_the_way="stay_out_of_the_way" in variant.tags, input=InputWaiting(),
                           tools=ToolChecks(), history=HistoryFidelity(),
                           wall_secs=round(time.perf_counter() - started, 3), error=f"{type(exc).__name__}: {exc}")


@dataclass
class ControlResult:
    """The evaluation of one toggled control.

    Parameters:
        calls: Every measured call of both arms.
        comparison: Both arms summarised.
        keep: Whether the minimum benefit was met.
        stop: The last stop-rule check.
        stopped_early: The run ended before all rounds (a stop or sample rule, or the budget).
        sample: The last sample-rule check (enough calls to decide).
    """

    control: str
    calls: list[CallMetrics]
    comparison: Comparison
    keep: RuleVerdict
    stop: RuleVerdict
    stopped_early: bool
    sample: RuleVerdict = field(default_factory=lambda: RuleVerdict(False))


@dataclass(frozen=True)
class Budget:
    """What a run may spend; a round that would go past it is not started.

    Parameters:
        calls: Simulated calls.
        tokens: Model tokens (as the provider's usage metadata reports them).
        minutes: Wall-clock minutes.
    """

    calls: int | None = None
    tokens: int | None = None
    minutes: float | None = None

    def exceeded_by(self, calls: int, tokens: int, secs: float, next_calls: int, per_call: tuple[float, float]) -> str:
        """Which limit the next round of ``next_calls`` calls would pass (empty: none).

        ``per_call`` is the (tokens, seconds) a call has cost so far, the estimate of the next round's.
        """
        if self.calls is not None and calls + next_calls > self.calls:
            return f"calls ({calls} simulated; the next round needs {next_calls}, budget {self.calls})"
        if self.tokens is not None and tokens + per_call[0] * next_calls > self.tokens:
            return f"tokens ({tokens} used, about {per_call[0] * next_calls:.0f} more per round, budget {self.tokens})"
        if self.minutes is not None and secs + per_call[1] * next_calls > self.minutes * 60:
            return (f"minutes ({secs / 60:.1f} spent, about {per_call[1] * next_calls / 60:.1f} more per round, "
                    f"budget {self.minutes:g})")
        return ""

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {"calls": self.calls, "tokens": self.tokens, "minutes": self.minutes}


@dataclass
class EvalRun:
    """A whole evaluation run.

    Parameters:
        runs: Rounds asked for (the most that run).
        seed: Seed of the timing variation, and of the model and caller model.
        results: Per control.
        wall_secs: Wall time of the run.
        calls_simulated: Calls run (shared arms counted once).
        model: The real model and its sampling (``None``: the scripted model).
        caller_model: The model that played goal callers (``None``: the offline brain).
        budget: What the run could spend.
        ended: Why the run ended.
        model_requests: Model requests over all calls simulated.
        tokens: Model tokens over all calls simulated (prompt, completion, total), as reported.
        caller_requests: Requests to the goal callers' model (cached lines excluded).
        tokens_reported: Whether the model reported usage (``False``: a server that sends none in a stream; ``tokens``
            are then zeros, not measurements).
        streamed_chars: Characters of text the model streamed over all calls.
    """

    scenarios: list[str]
    runs: int
    seed: int
    rules_source: str
    results: list[ControlResult] = field(default_factory=list)
    wall_secs: float = 0.0
    calls_simulated: int = 0
    model: ModelArm | None = None
    caller_model: ModelArm | None = None
    budget: Budget = field(default_factory=Budget)
    rounds_done: int = 0
    ended: str = ""
    model_requests: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    caller_requests: int = 0
    tokens_reported: bool = True
    streamed_chars: int = 0


def _execute(jobs: Sequence[CallJob], workers: int, pool: ProcessPoolExecutor | None,
             call_done: Callable[[int, int], None] | None = None) -> list[CallMetrics]:
    results: list[CallMetrics] = []
    if pool is None or len(jobs) < 2 or workers < 2:
        outputs: Iterable[CallMetrics] = (run_call(job) for job in jobs)
    else:
        outputs = pool.map(run_call, jobs, chunksize=1)
    for metrics in outputs:
        results.append(metrics)
        if call_done is not None:
            call_done(len(results), len(jobs))
    return results


def run_evaluation(scenarios: Sequence[Scenario], toggles: Sequence[str], rules: DecisionRules, *, runs: int = 1,
                   seed: int = 0, out_dir: str | Path, workers: int = 2, progress: Callable[[str], None] | None = None,
                   call_done: Callable[[int, int], None] | None = None, audio_turn_stop: str | None = None,
                   services: str = "scripted", model: ModelArm | None = None, caller_model: ModelArm | None = None,
                   budget: Budget | None = None) -> EvalRun:
    """Run the evaluation and return per-control results.

    Args:
        scenarios: Scenarios (as written).
        toggles: Controls to toggle one at a time (``all`` = full harness vs none).
        rules: Pre-declared decision rules.
        runs: Timing variants per scenario and arm (the most rounds that run).
        seed: Seed of the timing variation (and of the model's and caller model's sampling).
        out_dir: Directory for the traces (and the goal callers' line cache).
        workers: Processes running calls in parallel.
        progress: Called with a line after every round: calls, time, and per control the business outcome of both arms
            and whether a stop rule is met.
        call_done: Called after every call with (calls done, calls in the round).
        audio_turn_stop: Run every call on audio (Piper, Silero VAD, Whisper) with this stop strategy.
        services: ``scripted`` or ``loopback`` / ``loopback-openai`` (see ``simulate --services``).
        model: A real model answering in every call (``None``: each scenario's scripted model).
        caller_model: The model playing goal callers (``None``: the offline brain).
        budget: Calls, tokens and minutes the run may spend.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    for control in toggles:
        if control not in TOGGLES:
            raise ValueError(f"unknown control {control!r}; choose from {', '.join(TOGGLES)}")
    budget = budget or Budget()
    started = time.perf_counter()
    traces = Path(out_dir) / "traces"
    caller_cache = str(Path(out_dir) / "caller-lines")
    cache: dict[tuple[str, int, tuple[str, ...]], CallMetrics] = {}
    arms = {(c, s.name): arm_controls(c, s.domain) for c in toggles for s in scenarios}
    per_control: dict[str, dict[str, list[CallMetrics]]] = {c: {"on": [], "off": []} for c in toggles}
    active = list(dict.fromkeys(toggles))
    stops: dict[str, RuleVerdict] = {}
    rounds_done: dict[str, int] = dict.fromkeys(active, 0)
    ended = f"all {runs} round(s) run"
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_quiet_worker) if workers > 1 else None
    try:
        for run in range(runs):
            if not active:
                ended = "every control's stop or sample rule was met"
                break
            jobs: dict[tuple[str, int, tuple[str, ...]], CallJob] = {}
            for control in active:
                for scenario in scenarios:
                    for controls in arms[(control, scenario.name)]:
                        job = CallJob(scenario, run, seed, controls, str(traces / f"run{run}" / _arm_dir(controls)),
                                      audio_turn_stop, services, model, caller_model, caller_cache)
                        if job.key not in cache:
                            jobs.setdefault(job.key, job)
            spent = _spent(cache.values())
            # Calls run ``workers`` at a time: a round's wall time is its calls' divided by that.
            per_call = (spent[1][0], spent[1][1] / max(1, workers))
            if run and budget.tokens is not None and model is not None and not _usage_reported(cache.values()):
                ended = ("the token budget cannot be kept: the model reported no token usage "
                         "(give --budget-calls or --budget-minutes)")
                break
            over = budget.exceeded_by(len(cache), spent[0], time.perf_counter() - started, len(jobs),
                                      per_call) if run else ""
            if over:
                ended = f"budget of {over} would be passed by round {run + 1}"
                break
            done = _execute(list(jobs.values()), workers, pool, call_done)
            for job, metrics in zip(jobs.values(), done, strict=True):
                cache[job.key] = metrics
            round_lines = []
            for control in list(active):
                for scenario in scenarios:
                    on, off = arms[(control, scenario.name)]
                    per_control[control]["on"].append(replace(cache[(scenario.name, run, on)], arm="on"))
                    per_control[control]["off"].append(replace(cache[(scenario.name, run, off)], arm="off"))
                rounds_done[control] = run + 1
                comparison = compare_arms(control, per_control[control]["on"], per_control[control]["off"], run + 1)
                stops[control] = check_stop(rules, comparison)
                enough = check_sample(rules, comparison)
                round_lines.append(f"{control}: on {comparison.on.passed}/{comparison.on.calls} passed, off "
                                   f"{comparison.off.passed}/{comparison.off.calls} passed"
                                   + ("; STOP RULE MET" if stops[control].met else "")
                                   + ("; sample rule met" if enough.met else ""))
                if (stops[control].met or enough.met) and run + 1 < runs:
                    active.remove(control)
            if progress is not None:
                progress(f"round {run + 1}/{runs}: {len(jobs)} calls simulated, "
                         f"{time.perf_counter() - started:.0f} s elapsed; " + "; ".join(round_lines))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    evaluation = EvalRun([s.name for s in scenarios], runs, seed, rules.source, calls_simulated=len(cache),
                         model=model, caller_model=caller_model, budget=budget,
                         rounds_done=max(rounds_done.values(), default=0), ended=ended)
    for control in dict.fromkeys(toggles):
        comparison = compare_arms(control, per_control[control]["on"], per_control[control]["off"],
                                  rounds_done[control])
        stop = check_stop(rules, comparison)
        evaluation.results.append(ControlResult(control, per_control[control]["on"] + per_control[control]["off"],
                                                comparison, check_keep(rules, comparison), stop,
                                                stopped_early=rounds_done[control] < runs,
                                                sample=check_sample(rules, comparison)))
    calls = list(cache.values())
    evaluation.model_requests = sum(c.model_requests for c in calls)
    evaluation.caller_requests = sum(c.caller_requests for c in calls)
    evaluation.tokens = {"prompt": sum(c.prompt_tokens for c in calls),
                         "completion": sum(c.completion_tokens for c in calls),
                         "total": sum(c.total_tokens for c in calls)}
    evaluation.tokens_reported = model is None or _usage_reported(calls)
    evaluation.streamed_chars = sum(c.streamed_chars for c in calls)
    evaluation.wall_secs = round(time.perf_counter() - started, 2)
    return evaluation


def _usage_reported(calls: Iterable[CallMetrics]) -> bool:
    """Whether any model request of these calls came with usage (or none was made)."""
    calls = list(calls)
    return any(c.usage_reported for c in calls) or not any(c.model_requests for c in calls)


def _spent(calls: Iterable[CallMetrics]) -> tuple[int, tuple[float, float]]:
    """Tokens used so far, and the (tokens, wall seconds) of an average call."""
    calls = list(calls)
    tokens = sum(c.total_tokens for c in calls)
    if not calls:
        return 0, (0.0, 0.0)
    return tokens, (tokens / len(calls), sum(c.wall_secs for c in calls) / len(calls))
