"""Run the A/B evaluation: every scenario with a control on and off, over seeded timing variants.

The arms of a toggled control differ in that control only. Everything else is
each scenario domain's preset: ``on`` is the preset's enabled controls plus the
control, ``off`` the same minus it. ``all`` compares the preset's enabled
controls against none.

Runs proceed in rounds: round ``r`` runs timing variant ``r`` (see
:mod:`pipecat_harness.eval.variation`) of every scenario in both arms of every
toggled control; after each round the stop rules are checked and a control
whose regression rule is met gets no further rounds. A call whose controls,
scenario and variant were already run for another toggle is reused (the full
preset arm is shared by every toggle), and calls run in a process pool since
each one is a plain synchronous function driving its own virtual-time loop.
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

from pipecat_harness.config import CONTROL_NAMES, HarnessConfig
from pipecat_harness.eval.identifier_splits import InputWaiting
from pipecat_harness.eval.metrics import CallMetrics, HistoryFidelity
from pipecat_harness.eval.rules import DecisionRules, RuleVerdict, check_keep, check_stop
from pipecat_harness.eval.summary import Comparison, compare_arms
from pipecat_harness.eval.tool_checks import ToolChecks
from pipecat_harness.eval.variation import vary_scenario
from pipecat_harness.sim.scenario import Scenario

__all__ = ["TOGGLES", "CallJob", "ControlResult", "EvalRun", "arm_controls", "run_call", "run_evaluation"]

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
    """

    scenario: Scenario
    run: int
    seed: int
    controls: tuple[str, ...]
    trace_dir: str
    audio_turn_stop: str | None = None
    services: str = "scripted"

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

    A simulation that raises is returned as a failed call with its error, so
    one broken scenario cannot take the evaluation down.
    """
    from pipecat_harness.eval.metrics import measure_call
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
            result = run_scenario(variant, controls=list(job.controls), trace_dir=job.trace_dir,
                                  services=job.services, audio=audio)  # type: ignore[arg-type]
        timeline = Timeline.load(result.trace_path) if result.trace_path else Timeline([])
        return measure_call(variant, result, timeline, arm="", run=job.run)
    except Exception as exc:  # a broken scenario is a failed call, reported with its reason
        return CallMetrics(
            scenario=variant.name, domain=variant.domain, arm="", run=job.run, controls=list(job.controls),
            passed=False, expected="pass", stay_out_of_the_way="stay_out_of_the_way" in variant.tags,
            input=InputWaiting(), tools=ToolChecks(), history=HistoryFidelity(),
            wall_secs=round(time.perf_counter() - started, 3), error=f"{type(exc).__name__}: {exc}",
        )


@dataclass
class ControlResult:
    """The evaluation of one toggled control.

    Parameters:
        control: The toggled control.
        calls: Every measured call of both arms.
        comparison: Both arms summarised.
        keep: Whether the minimum benefit was met.
        stop: The last stop-rule check.
        stopped_early: The run ended before all rounds because of ``stop``.
    """

    control: str
    calls: list[CallMetrics]
    comparison: Comparison
    keep: RuleVerdict
    stop: RuleVerdict
    stopped_early: bool


@dataclass
class EvalRun:
    """A whole evaluation run."""

    scenarios: list[str]
    runs: int
    seed: int
    rules_source: str
    results: list[ControlResult] = field(default_factory=list)
    wall_secs: float = 0.0
    calls_simulated: int = 0


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


def run_evaluation(
    scenarios: Sequence[Scenario],
    toggles: Sequence[str],
    rules: DecisionRules,
    *,
    runs: int = 1,
    seed: int = 0,
    out_dir: str | Path,
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
    call_done: Callable[[int, int], None] | None = None,
    audio_turn_stop: str | None = None,
    services: str = "scripted",
) -> EvalRun:
    """Run the evaluation and return per-control results.

    Args:
        scenarios: Scenarios (as written).
        toggles: Controls to toggle one at a time (``all`` = full harness vs none).
        rules: Pre-declared decision rules.
        runs: Timing variants per scenario and arm.
        seed: Seed of the timing variation.
        out_dir: Directory for the traces.
        workers: Processes running calls in parallel.
        progress: Called with a line after every round: calls, time, and per
            control the business outcome of both arms and whether a stop rule is met.
        call_done: Called after every call with (calls done, calls in the round).
        audio_turn_stop: Run every call on audio (Piper, Silero VAD, Whisper) with this stop strategy.
        services: ``scripted`` or ``loopback`` / ``loopback-openai`` (see ``simulate --services``).
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    for control in toggles:
        if control not in TOGGLES:
            raise ValueError(f"unknown control {control!r}; choose from {', '.join(TOGGLES)}")
    started = time.perf_counter()
    traces = Path(out_dir) / "traces"
    cache: dict[tuple[str, int, tuple[str, ...]], CallMetrics] = {}
    arms = {(c, s.name): arm_controls(c, s.domain) for c in toggles for s in scenarios}
    per_control: dict[str, dict[str, list[CallMetrics]]] = {c: {"on": [], "off": []} for c in toggles}
    active = list(dict.fromkeys(toggles))
    stops: dict[str, RuleVerdict] = {}
    rounds_done: dict[str, int] = dict.fromkeys(active, 0)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_quiet_worker) if workers > 1 else None
    try:
        for run in range(runs):
            if not active:
                break
            jobs: dict[tuple[str, int, tuple[str, ...]], CallJob] = {}
            for control in active:
                for scenario in scenarios:
                    for controls in arms[(control, scenario.name)]:
                        job = CallJob(scenario, run, seed, controls, str(traces / f"run{run}" / _arm_dir(controls)),
                                      audio_turn_stop, services)
                        if job.key not in cache:
                            jobs.setdefault(job.key, job)
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
                round_lines.append(f"{control}: on {comparison.on.passed}/{comparison.on.calls} passed, off "
                                   f"{comparison.off.passed}/{comparison.off.calls} passed"
                                   + ("; STOP RULE MET" if stops[control].met else ""))
                if stops[control].met and run + 1 < runs:
                    active.remove(control)
            if progress is not None:
                progress(f"round {run + 1}/{runs}: {len(jobs)} calls simulated, "
                         f"{time.perf_counter() - started:.0f} s elapsed; " + "; ".join(round_lines))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    evaluation = EvalRun([s.name for s in scenarios], runs, seed, rules.source, calls_simulated=len(cache))
    for control in dict.fromkeys(toggles):
        comparison = compare_arms(control, per_control[control]["on"], per_control[control]["off"],
                                  rounds_done[control])
        stop = check_stop(rules, comparison)
        evaluation.results.append(ControlResult(
            control, per_control[control]["on"] + per_control[control]["off"], comparison,
            check_keep(rules, comparison), stop, stopped_early=rounds_done[control] < runs,
        ))
    evaluation.wall_secs = round(time.perf_counter() - started, 2)
    return evaluation
