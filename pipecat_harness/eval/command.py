"""``pipecat-harness eval``: switch one control at a time over many simulated calls and report benefit and cost.

Writes ``results.json``, ``report.html``, ``traces/`` under ``--out``; exits 0, 1 if a stop rule is met, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from pipecat_harness.eval.html_report import write_report
from pipecat_harness.eval.results import compare_results, load_results, write_results
from pipecat_harness.eval.rules import RulesError, load_rules
from pipecat_harness.eval.runner import TOGGLES, Budget, run_evaluation
from pipecat_harness.eval.table import print_comparison, print_report
from pipecat_harness.sim.model_arm import ModelArm, ModelArmError
from pipecat_harness.sim.scenario import ScenarioError, load_scenarios

__all__ = ["MAX_ROUNDS", "ModelOptions", "add_model_arguments", "add_parser", "model_options"]

#: Rounds of a budgeted run with no ``--runs`` (also the most ``--runs`` accepts).
MAX_ROUNDS = 100


@dataclass(frozen=True)
class ModelOptions:
    """The real-model settings of one ``eval`` run."""

    model: ModelArm | None
    caller_model: ModelArm | None
    budget: Budget
    runs: int


def add_model_arguments(parser: Any) -> None:
    """Add ``--model``, ``--base-url``, ``--temperature``, ``--max-tokens``, ``--caller-model`` and the budgets."""
    add = parser.add_argument_group("real model (needs GOOGLE_API_KEY or OPENAI_API_KEY)").add_argument
    model = "PROVIDER:NAME"
    add("--model", metavar=model,
        help="decide with a real model instead of the scripted one: gemini:<name> or openai:<name>")
    add("--base-url", help="API root of the model (any OpenAI-compatible endpoint with openai:)")
    add("--temperature", type=float, default=0.0,
        help="sampling temperature of the model (default 0; the seed is --seed)")
    add("--max-tokens", type=int, help="output limit of every model request, recorded in results.json (default: the "
        "provider's own, which some servers leave unlimited)")
    add("--caller-model", metavar=model, help="model playing goal callers (default: the offline brain)")
    add("--caller-base-url", help="API root of the caller model (OpenAI-compatible)")
    for name, kind, what in (("calls", int, "calls"), ("tokens", int, "model tokens"), ("minutes", float, "minutes")):
        add(f"--budget-{name}", type=kind, help=f"stop before a round would pass this many {what}")


def model_options(args: argparse.Namespace, runs_given: bool) -> ModelOptions:
    """Read and check the options (a ``ModelArmError`` for a bad model option, a ``ValueError`` for a bad budget)."""
    arm = dict(base_url=args.base_url, temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens)
    model = ModelArm.parse(args.model, **arm) if args.model else None
    if model is None and args.base_url:
        raise ValueError("--base-url goes with --model (the endpoint of that model)")
    if model is None and args.max_tokens is not None:
        raise ValueError("--max-tokens goes with --model (the output limit of that model)")
    caller = ModelArm.parse(args.caller_model, base_url=args.caller_base_url, seed=args.seed,
                            option="--caller-model") if args.caller_model else None
    budget = Budget(args.budget_calls, args.budget_tokens, args.budget_minutes)
    for name, value in budget.to_dict().items():
        if value is not None and value <= 0:
            raise ValueError(f"--budget-{name} must be positive, got {value:g}")
    return ModelOptions(model, caller, budget, args.runs if runs_given or budget == Budget() else MAX_ROUNDS)


def add_parser(subparsers: Any) -> None:
    """Register ``eval``."""
    parser = subparsers.add_parser(
        "eval", help="A/B evaluation: each control on and off over the scenarios, benefit and cost per control",
        description="Run every scenario with a control on and off (everything else fixed), N times with seeded "
        "variation of caller timing, and print per control the target error, its cost and the business outcome "
        "of both arms, with the number of calls behind each figure.")
    add = parser.add_argument
    add("scenarios", nargs="*", help="scenario files or directories (default: the bundled set)")
    add("--toggle", action="append", required=True, metavar="CONTROL",
        help=f"control to switch on/off (repeatable, or comma-separated): {', '.join(TOGGLES)}")
    add("--runs", type=int, help="timing variants per scenario and arm (default 1; with a --budget-*: until a rule or "
        "the budget ends the run)")
    add("--seed", type=int, default=0, help="seed of the timing variation (default 0)")
    add("--rules", help="decision rules YAML (default: the bundled rules)")
    add("--out", default="eval-results", help="output directory (default: ./eval-results)")
    add("--workers", type=int, default=min(2, os.cpu_count() or 1), help="parallel simulation processes (default: 2)")
    add("--services", choices=("scripted", "loopback", "loopback-openai"), default="scripted",
        help="scripted simulator services, or the bots' services against the loopback fakes")
    add("--compare", metavar="RESULTS_JSON", help="an earlier results.json to compare with")
    add("--audio", action="store_true",
        help="run every call on audio: Piper, Silero VAD, Whisper tiny.en (needs the [audio] extra)")
    add("--turn-stop", choices=["speech_timeout", "smart_turn"], default="speech_timeout",
        help="with --audio: the stop strategy (default: speech_timeout)")
    add_model_arguments(parser)
    parser.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=150)
    try:
        toggles = [t.strip() for value in args.toggle for t in value.split(",") if t.strip()]
        if unknown := [t for t in toggles if t not in TOGGLES]:
            raise ValueError(f"unknown control(s) {', '.join(unknown)}; choose from {', '.join(TOGGLES)}")
        toggles = list(dict.fromkeys(toggles))
        if args.runs is not None and not 1 <= args.runs <= MAX_ROUNDS:
            raise ValueError(f"--runs must be between 1 and {MAX_ROUNDS}")
        runs_given, args.runs = args.runs is not None, args.runs or 1
        options = model_options(args, runs_given=runs_given)
        if args.workers < 1:
            raise ValueError("--workers must be at least 1")
        rules = load_rules(args.rules)
        scenarios = load_scenarios(args.scenarios or None)
        previous = load_results(args.compare) if args.compare else None
        if previous is not None:
            _check_same_scenarios(args.compare, previous, [s.name for s in scenarios])
        if args.audio:
            if options.model is not None:
                raise ValueError("--audio runs the scripted model; drop --model or --audio")
            from pipecat_harness.sim.audio.requirements import require_audio_mode

            require_audio_mode()
        if options.model is not None and args.services != "scripted":
            raise ValueError("--model brings its own LLM service; drop --services")
    except (ValueError, RuntimeError, RulesError, ScenarioError, ModelArmError) as exc:
        print(f"pipecat-harness eval: {exc}", file=sys.stderr)
        return 2
    if not scenarios:
        print("pipecat-harness eval: no scenarios found", file=sys.stderr)
        return 2
    out = Path(args.out)
    with _CallProgress() as calls:
        evaluation = run_evaluation(scenarios, toggles, rules, runs=options.runs, seed=args.seed, out_dir=out,
                                    workers=args.workers, progress=calls.round_done, call_done=calls.call_done,
                                    services=args.services, audio_turn_stop=args.turn_stop if args.audio else None,
                                    model=options.model, caller_model=options.caller_model, budget=options.budget)
    print_report(evaluation, console)
    results, report = write_results(evaluation, out / "results.json"), write_report(evaluation, out / "report.html")
    if previous is not None:
        print_comparison(compare_results(previous, load_results(results)), console)
    stopped = [r.control for r in evaluation.results if r.stop.met]
    console.print(f"{evaluation.calls_simulated} calls simulated in {evaluation.wall_secs:.0f} s; results: {results}; "
                  f"report: {report}", highlight=False, markup=False)
    if stopped:
        console.print(f"stop rule met for {', '.join(stopped)}: exit status 1", highlight=False, markup=False)
    return 1 if stopped else 0


def _check_same_scenarios(path: str, previous: dict[str, Any], names: list[str]) -> None:
    """Refuse to compare runs over different scenarios: their figures would not measure the same calls."""
    before, now = set(previous.get("scenarios") or []), set(names)
    if before != now:
        missing, extra = ", ".join(sorted(before - now)) or "none", ", ".join(sorted(now - before)) or "none"
        raise ValueError(f"--compare {path}: that run covered other scenarios (only there: {missing}; only in "
                         f"this run: {extra}); run the same scenarios to compare")


class _CallProgress:
    """A progress bar of the calls of each round on a terminal, a line per tenth of them otherwise."""

    def __init__(self) -> None:
        self.err = Console(stderr=True)
        self.round = 1
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> _CallProgress:
        if self.err.is_terminal:
            columns = TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
            self.bar = Progress(*columns, console=self.err, transient=True)
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def call_done(self, done: int, total: int) -> None:
        if self.bar is None:
            if done == total or done % max(1, total // 10) == 0:
                print(f"round {self.round}: {done}/{total} calls", file=sys.stderr, flush=True)
            return
        if self.task is None:
            self.task = self.bar.add_task(f"round {self.round}", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def round_done(self, line: str) -> None:
        if self.bar is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self.bar.console.print(line, highlight=False, markup=False)
            if self.task is not None:
                self.bar.remove_task(self.task)
                self.task = None
        self.round += 1
