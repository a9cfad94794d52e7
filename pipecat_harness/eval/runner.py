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
from pipecat_harness.eval.metrics import CallMetrics
from pipecat_harness.eval.rules import DecisionRules, RuleVerdict, check_keep, check_sample, check_stop
from pipecat_harness.eval.summary import Comparison, compare_arms
from pipecat_harness.eval.variation import vary_scenario
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.scenario import Scenario

__all__ = ["TOGGLES", "Budget", "CallJob", "ControlResult", "EvalRun", "arm_controls", "run_call", "run_evaluation"]

#: What ``--toggle`` accepts.
TOGGLES = (*CONTROL_NAMES, "all")

_CallKey = tuple[str, int, tuple[str, ...]]
_CallDone = Callable[[int, int], None]


@dataclass(frozen=True)
class CallJob:
    """One simulated call to run: timing variant ``run`` of a scenario (as written) with a set of controls.

    The fields after ``trace_dir`` are :func:`run_evaluation`'s options (``caller_cache``: goal callers' lines).
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
    def key(self) -> _CallKey:
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


def _quiet_worker() -> None:
    """Pool initializer: a worker's Pipecat logs would interleave with the tables, so they stay off."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_HARNESS_LOG_LEVEL", "CRITICAL"))


def run_call(job: CallJob) -> CallMetrics:
    """Run and measure one call (the pool's unit of work); a simulation that raises is a failed call with its error."""
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
                                  services=job.services,  # type: ignore[arg-type]
                                  audio=audio, model=job.model, goal_caller=goal_caller)
        timeline = Timeline.load(result.trace_path) if result.trace_path else Timeline([])
        return measure_call(variant, result, timeline, arm="", run=job.run)
    except Exception as exc:  # a broken scenario is a failed call, reported with its reason
        return CallMetrics(scenario=variant.name, domain=variant.domain, arm="", run=job.run,
                           controls=list(job.controls), passed=False, expected="pass",
                           stay_out_of_the_way="stay_out_of_the_way" in variant.tags,
                           wall_secs=round(time.perf_counter() - started, 3), error=f"{type(exc).__name__}: {exc}")


@dataclass
class ControlResult:
    """The evaluation of one toggled control: every call of both arms, and the last check of each rule.

    Parameters:
        stopped_early: The run ended before all rounds (a stop or sample rule, or the budget).
    """

    control: str
    calls: list[CallMetrics]
    comparison: Comparison
    keep: RuleVerdict
    stop: RuleVerdict
    stopped_early: bool
    sample: RuleVerdict = field(default_factory=lambda: RuleVerdict(False))

    def calls_of(self, arm: str) -> list[CallMetrics]:
        """The calls of one arm (``on`` or ``off``)."""
        return [c for c in self.calls if c.arm == arm]


@dataclass(frozen=True)
class Budget:
    """What a run may spend (calls, model tokens as reported, wall-clock minutes); a round past it is not started."""

    calls: int | None = None
    tokens: int | None = None
    minutes: float | None = None

    def exceeded_by(self, calls: int, tokens: int, secs: float, next_calls: int, per_call: tuple[float, float]) -> str:
        """Which limit ``next_calls`` more calls at ``per_call`` (tokens, seconds) each would pass (empty: none)."""
        more_tokens, more_secs = per_call[0] * next_calls, per_call[1] * next_calls
        if self.calls is not None and calls + next_calls > self.calls:
            return f"calls ({calls} simulated; the next round needs {next_calls}, budget {self.calls})"
        if self.tokens is not None and tokens + more_tokens > self.tokens:
            return f"tokens ({tokens} used, about {more_tokens:.0f} more per round, budget {self.tokens})"
        if self.minutes is not None and secs + more_secs > self.minutes * 60:
            spent = f"{secs / 60:.1f} spent, about {more_secs / 60:.1f} more per round"
            return f"minutes ({spent}, budget {self.minutes:g})"
        return ""

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {"calls": self.calls, "tokens": self.tokens, "minutes": self.minutes}


@dataclass
class EvalRun:
    """A whole evaluation run (``runs``, ``seed``, ``model`` and ``caller_model`` as given to :func:`run_evaluation`).

    Parameters:
        calls_simulated: Calls run (shared arms counted once); the usage figures sum over them.
        ended: Why the run ended.
        tokens_reported: Whether the model reported usage (``False``: a server that sends none in a stream; ``tokens``
            are then zeros, not measurements).
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


def _execute(jobs: Sequence[CallJob], pool: ProcessPoolExecutor | None,
             call_done: _CallDone | None) -> list[CallMetrics]:
    outputs = pool.map(run_call, jobs, chunksize=1) if pool is not None and len(jobs) > 1 else map(run_call, jobs)
    results: list[CallMetrics] = []
    for metrics in outputs:
        results.append(metrics)
        if call_done is not None:
            call_done(len(results), len(jobs))
    return results


def _usage_reported(calls: Iterable[CallMetrics]) -> bool:
    """Whether any model request of these calls came with usage (or none was made)."""
    calls = list(calls)
    return any(c.usage_reported for c in calls) or not any(c.model_requests for c in calls)


def _spent(calls: list[CallMetrics], workers: int) -> tuple[int, tuple[float, float]]:
    """Tokens used so far, and the (tokens, wall seconds) of an average call; calls run ``workers`` at a time."""
    tokens, n = sum(c.total_tokens for c in calls), max(len(calls), 1)
    return tokens, (tokens / n, sum(c.wall_secs for c in calls) / n / max(1, workers))


def run_evaluation(scenarios: Sequence[Scenario], toggles: Sequence[str], rules: DecisionRules, *, runs: int = 1,
                   seed: int = 0, out_dir: str | Path, workers: int = 2, progress: Callable[[str], None] | None = None,
                   call_done: _CallDone | None = None, audio_turn_stop: str | None = None, services: str = "scripted",
                   model: ModelArm | None = None, caller_model: ModelArm | None = None,
                   budget: Budget | None = None) -> EvalRun:
    """Run the evaluation and return per-control results.

    ``toggles`` are switched one at a time (``all``: the preset against none) over at most ``runs`` rounds of timing
    variants seeded by ``seed`` (the models' too), ``workers`` processes at a time, traces under ``out_dir``.
    ``progress`` gets a line per round, ``call_done`` (done, in the round) one per call. ``audio_turn_stop`` runs calls
    on audio; ``services``, ``model`` (``None``: each scenario's scripted one) and ``caller_model`` (``None``: the
    offline brain) are ``simulate``'s.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    if unknown := [c for c in toggles if c not in TOGGLES]:
        raise ValueError(f"unknown control {unknown[0]!r}; choose from {', '.join(TOGGLES)}")
    budget, started, traces = budget or Budget(), time.perf_counter(), Path(out_dir) / "traces"
    # The fields of every CallJob after its trace directory.
    same_for_all = (audio_turn_stop, services, model, caller_model, str(Path(out_dir) / "caller-lines"))
    arms = {(c, s.name): arm_controls(c, s.domain) for c in toggles for s in scenarios}
    cache: dict[_CallKey, CallMetrics] = {}
    arm_calls: dict[str, dict[str, list[CallMetrics]]] = {c: {"on": [], "off": []} for c in toggles}
    active = list(dict.fromkeys(toggles))
    judged: dict[str, ControlResult] = {}
    ended = f"all {runs} round(s) run"
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_quiet_worker) if workers > 1 else None
    try:
        for run in range(runs):
            if not active:
                ended = "every control's stop or sample rule was met"
                break
            planned = (CallJob(s, run, seed, c, str(traces / f"run{run}" / ("+".join(c) or "no_controls")),
                               *same_for_all) for control in active for s in scenarios for c in arms[control, s.name])
            jobs = {job.key: job for job in planned if job.key not in cache}
            if run and budget.tokens is not None and model is not None and not _usage_reported(cache.values()):
                ended = ("the token budget cannot be kept: the model reported no token usage "
                         "(give --budget-calls or --budget-minutes)")
                break
            if run:
                tokens, per_call = _spent(list(cache.values()), workers)
                over = budget.exceeded_by(len(cache), tokens, time.perf_counter() - started, len(jobs), per_call)
                if over:
                    ended = f"budget of {over} would be passed by round {run + 1}"
                    break
            cache.update(zip(jobs, _execute(list(jobs.values()), pool, call_done), strict=True))
            round_lines = []
            for control in list(active):
                for scenario in scenarios:
                    for arm, controls in zip(("on", "off"), arms[control, scenario.name], strict=True):
                        arm_calls[control][arm].append(replace(cache[scenario.name, run, controls], arm=arm))
                on_arm, off_arm, rounds_left = arm_calls[control]["on"], arm_calls[control]["off"], run + 1 < runs
                comparison = compare_arms(control, on_arm, off_arm, run + 1)
                keep, stop, sample = (check(rules, comparison) for check in (check_keep, check_stop, check_sample))
                judged[control] = ControlResult(control, on_arm + off_arm, comparison, keep, stop, rounds_left, sample)
                on, off = comparison.on, comparison.off
                passed = f"on {on.passed}/{on.calls} passed, off {off.passed}/{off.calls} passed"
                flags = ("; STOP RULE MET" if stop.met else "") + ("; sample rule met" if sample.met else "")
                round_lines.append(f"{control}: {passed}{flags}")
                if (stop.met or sample.met) and rounds_left:
                    active.remove(control)
            if progress is not None:
                elapsed = f"{len(jobs)} calls simulated, {time.perf_counter() - started:.0f} s elapsed"
                progress(f"round {run + 1}/{runs}: {elapsed}; " + "; ".join(round_lines))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    calls = list(cache.values())
    return EvalRun(
        [s.name for s in scenarios], runs, seed, rules.source, results=list(judged.values()),
        wall_secs=round(time.perf_counter() - started, 2), calls_simulated=len(calls), model=model,
        caller_model=caller_model, budget=budget,
        rounds_done=max((r.comparison.runs_done for r in judged.values()), default=0), ended=ended,
        model_requests=sum(c.model_requests for c in calls),
        tokens={k: sum(getattr(c, f"{k}_tokens") for c in calls) for k in ("prompt", "completion", "total")},
        caller_requests=sum(c.caller_requests for c in calls), tokens_reported=model is None or _usage_reported(calls),
        streamed_chars=sum(c.streamed_chars for c in calls))
