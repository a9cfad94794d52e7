"""``pipecat-harness eval``: switch one control at a time over many simulated calls and report benefit and cost.

Writes ``results.json``, ``report.html`` and ``traces/`` under ``--out``. Exits 0 when no stop rule is met, 1 when one
is (in any round), 2 on bad input (including ``--compare`` with a run over other scenarios).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from pipecat_harness.eval.html_report import write_report
from pipecat_harness.eval.model_options import MAX_ROUNDS, add_model_arguments, model_options
from pipecat_harness.eval.results import compare_results, load_results, write_results
from pipecat_harness.eval.rules import RulesError, load_rules
from pipecat_harness.eval.runner import TOGGLES, run_evaluation
from pipecat_harness.eval.table import print_comparison, print_report
from pipecat_harness.sim.model_arm import ModelArmError
from pipecat_harness.sim.scenario import ScenarioError, load_scenarios

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> None:
    """Register ``eval``."""
    parser = subparsers.add_parser(
        "eval",
        help="A/B evaluation: each control on and off over the scenarios, benefit and cost per control",
        description="Run every scenario with a control on and off (everything else fixed), N times with seeded "
        "variation of caller timing, and print per control the target error, its cost and the business outcome "
        "of both arms, with the number of calls behind each figure.",
    )
    add = parser.add_argument
    add("scenarios", nargs="*", help="scenario files or directories (default: the bundled set)")
    toggles = ", ".join(TOGGLES)
    add(
        "--toggle",
        action="append",
        required=True,
        metavar="CONTROL",
        help=f"control to switch on/off (repeatable, or comma-separated): {toggles}",
    )
    add(
        "--runs",
        type=int,
        help="timing variants per scenario and arm (default 1; with a --budget-*: until a rule or "
        "the budget ends the run)",
    )
    add("--seed", type=int, default=0, help="seed of the timing variation (default 0)")
    add("--rules", help="decision rules YAML (default: the bundled rules)")
    add("--out", default="eval-results", help="output directory (default: ./eval-results)")
    add("--workers", type=int, default=min(2, os.cpu_count() or 1), help="parallel simulation processes (default: 2)")
    add(
        "--services",
        choices=("scripted", "loopback", "loopback-openai"),
        default="scripted",
        help="scripted simulator services, or the bots' services against the loopback fakes",
    )
    add("--compare", metavar="RESULTS_JSON", help="an earlier results.json to compare with")
    add(
        "--audio",
        action="store_true",
        help="run every call on audio: Piper, Silero VAD, Whisper tiny.en (needs the [audio] extra)",
    )
    add(
        "--turn-stop",
        choices=["speech_timeout", "smart_turn"],
        default="speech_timeout",
        help="with --audio: the stop strategy (default: speech_timeout)",
    )
    add_model_arguments(parser)
    parser.set_defaults(func=_eval)


def _toggles(values: list[str]) -> list[str]:
    toggles = [t.strip() for value in values for t in value.split(",") if t.strip()]
    unknown = [t for t in toggles if t not in TOGGLES]
    if unknown:
        raise ValueError(f"unknown control(s) {', '.join(unknown)}; choose from {', '.join(TOGGLES)}")
    return list(dict.fromkeys(toggles))


def _eval(args: argparse.Namespace) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=150)
    try:
        toggles = _toggles(args.toggle)
        if args.runs is not None and not 1 <= args.runs <= MAX_ROUNDS:
            raise ValueError(f"--runs must be between 1 and {MAX_ROUNDS}")
        runs_given = args.runs is not None
        args.runs = args.runs or 1
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
        evaluation = run_evaluation(
            scenarios,
            toggles,
            rules,
            runs=options.runs,
            seed=args.seed,
            out_dir=out,
            workers=args.workers,
            progress=calls.round_done,
            call_done=calls.call_done,
            services=args.services,
            audio_turn_stop=args.turn_stop if args.audio else None,
            model=options.model,
            caller_model=options.caller_model,
            budget=options.budget,
        )
    print_report(evaluation, console)
    results, report = write_results(evaluation, out / "results.json"), write_report(evaluation, out / "report.html")
    if previous is not None:
        print_comparison(compare_results(previous, load_results(results)), console)
    secs = f"{evaluation.wall_secs:.0f} s"
    lines = [f"{evaluation.calls_simulated} calls simulated in {secs}; results: {results}; report: {report}"]
    stopped = [r.control for r in evaluation.results if r.stop.met]
    if stopped:
        lines.append(f"stop rule met for {', '.join(stopped)}: exit status 1")
    for line in lines:
        console.print(line, highlight=False, markup=False)
    return 1 if stopped else 0


def _check_same_scenarios(path: str, previous: dict[str, Any], names: list[str]) -> None:
    """Refuse to compare runs over different scenarios: their figures would not measure the same calls."""
    before, now = set(previous.get("scenarios") or []), set(names)
    if before != now:
        missing, extra = ", ".join(sorted(before - now)) or "none", ", ".join(sorted(now - before)) or "none"
        raise ValueError(
            f"--compare {path}: that run covered other scenarios (only there: {missing}; only in "
            f"this run: {extra}); run the same scenarios to compare"
        )


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
