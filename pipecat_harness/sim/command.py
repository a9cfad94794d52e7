"""``pipecat-harness simulate``: run simulated calls offline and check their business outcomes.

A scenario that cannot run is reported in one sentence and fails alone; the exit status is then 2 (bad input) rather
than 1 (an outcome not as expected).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipecat_harness.bundled import bundled_names
from pipecat_harness.config import CONTROL_NAMES, ConfigError, GraderSettings, HarnessConfig
from pipecat_harness.errors import InputError
from pipecat_harness.sim.audio.requirements import AudioModeUnavailable
from pipecat_harness.sim.runner import SIM_SERVICES, CallResult, run_scenario
from pipecat_harness.sim.scenario import (
    Scenario,
    ScenarioError,
    bundled_scenario_names,
    check_unique_names,
    load_scenario,
    scenario_files,
)
from pipecat_harness.trace.show import render_timeline
from pipecat_harness.trace.timeline import Timeline

__all__ = ["add_parser", "quiet_pipecat_logs"]

_NOT_AS_EXPECTED = "[red]NOT AS EXPECTED[/red]"


def quiet_pipecat_logs(verbose: bool = False) -> None:
    """Keep Pipecat's per-frame logging off the terminal unless asked for."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if verbose else "ERROR")


def add_parser(subparsers: Any) -> None:
    """Register ``simulate``."""
    parser = subparsers.add_parser(
        "simulate", help="run simulated calls (bundled scenarios by default) and check their outcomes",
        description="Run each scenario as a call through a real Pipecat pipeline on virtual time, with no keys "
        "and no network. Exits 1 when a call's outcome differs from what the scenario expects with the active "
        "controls, 2 when a scenario or setting cannot be used.")
    add = parser.add_argument
    add("scenarios", nargs="*", help="scenario files, directories or bundled scenario names (default: the bundled set)")
    add("-s", "--scenario", action="append", default=[], metavar="NAME",
        help="a bundled scenario by name, e.g. duplicate_refund (repeatable; --list shows them)")
    add("--list", action="store_true", help="list the bundled scenarios and exit")
    add("--config", help="a HarnessConfig YAML file (default: each scenario domain's preset)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--controls",
                       help=f"comma-separated controls to enable, the rest off ({', '.join(CONTROL_NAMES)})")
    group.add_argument("--no-controls", action="store_true", help="run with every control off")
    add("--without", action="append", default=[], metavar="CONTROL", help="switch one control off")
    add("--services", choices=SIM_SERVICES, default="scripted", help="scripted: the simulator's own LLM and TTS; "
        "loopback: the bots' Deepgram, Gemini and ElevenLabs services against protocol fakes on 127.0.0.1 "
        "(loopback-openai: OpenAILLMService instead of Gemini)")
    add("--traces", default="traces", help="directory for call timelines (default: ./traces)")
    add("--timeline", nargs="?", const="short", choices=["short", "full", "none"], default=None,
        help="print every call's timeline (short, or full with per-frame events); none prints no timeline; by default "
        "only calls not as expected get theirs")
    add("--audio", action="store_true", help="voice the caller with Piper and recognise it with Silero VAD and Whisper "
        "tiny.en (needs the [audio] extra; audio and transcripts are cached)")
    add("--turn-stop", choices=["speech_timeout", "smart_turn"], default="speech_timeout",
        help="with --audio: the stop strategy (default: speech_timeout)")
    add("-v", "--verbose", action="store_true", help="show Pipecat's logs")
    parser.set_defaults(func=_simulate)


@dataclass
class _Row:
    """One scenario's line in the summary: a result, or the sentence saying why it could not run."""

    name: str
    result: CallResult | None = None
    error: str = ""
    heard: list[str] = field(default_factory=list)


def _requested_controls(args: argparse.Namespace) -> list[str] | None:
    if args.no_controls:
        return []
    if args.controls is not None:
        return [c.strip() for c in args.controls.split(",") if c.strip()]
    return None


def _check_control_names(args: argparse.Namespace) -> None:
    for flag, names in (("--controls", _requested_controls(args) or []), ("--without", args.without)):
        unknown = [name for name in names if name not in CONTROL_NAMES]
        if unknown:
            raise ConfigError(f"{flag}: unknown control(s) {', '.join(unknown)}; controls are "
                              f"{', '.join(CONTROL_NAMES)}")


def _config_for(args: argparse.Namespace, base: HarnessConfig | None, domain: str, trace_dir: Path) -> HarnessConfig:
    """The call's config; a grader takes the domain's bundled constraints unless given, its audit beside the traces."""
    config = base if base is not None else HarnessConfig.preset(domain)  # type: ignore[arg-type]
    if args.without:
        config = config.with_controls(**dict.fromkeys(args.without, False))
    controls = _requested_controls(args)
    if controls is not None:
        config = config.only(*controls)
    grader = config.grader
    if not grader.enabled:
        return config
    update: dict[str, Any] = {}
    if grader.audit_url == GraderSettings().audit_url:
        update["audit_url"] = f"sqlite+aiosqlite:///{trace_dir / 'grader_audit.db'}"
    if not grader.constraints_path:
        update["constraints_path"] = f"bundled:{domain}"
    if domain not in bundled_names("constraint list") and not grader.constraints_path:
        raise InputError(f"grader.constraints_path is not set and no constraint list is bundled for domain "
                         f"'{domain}'; set it in the --config file (a path, or bundled:retail)")
    trace_dir.mkdir(parents=True, exist_ok=True)
    return config.model_copy(update={"grader": grader.model_copy(update=update)})


def _print_error(message: str) -> None:
    print(f"pipecat-harness simulate: {message}", file=sys.stderr)


def _simulate(args: argparse.Namespace) -> int:
    quiet_pipecat_logs(args.verbose)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    if args.list:
        for name in bundled_scenario_names():
            console.print(name, highlight=False)
        return 0
    rows: list[_Row] = []
    scenarios: list[Scenario] = []
    try:
        _check_control_names(args)
        base = HarnessConfig.from_yaml(args.config) if args.config else None
        files = scenario_files([*args.scenarios, *args.scenario] or None)
        if not files:
            raise InputError("no scenario files found; give files, directories or bundled names (see --list)")
        for path in files:
            try:
                scenarios.append(load_scenario(path))
            except ScenarioError as exc:
                rows.append(_Row(path.stem, error=str(exc)))
                _print_error(str(exc))
        check_unique_names(scenarios)
        audio = None
        if args.audio:
            from pipecat_harness.sim.audio.mode import AudioMode

            audio = AudioMode(turn_stop=args.turn_stop)
    except (InputError, AudioModeUnavailable) as exc:
        _print_error(str(exc))
        return 2
    trace_dir = Path(args.traces)
    started = time.perf_counter()
    for number, scenario in enumerate(scenarios, start=1):
        row = _Row(scenario.name)
        rows.append(row)
        try:
            config = _config_for(args, base, scenario.domain, trace_dir)
            row.result = run_scenario(scenario, config, trace_dir=trace_dir, services=args.services, audio=audio)
            row.heard = list(audio.last_heard) if audio is not None else []
        except ConfigError as exc:  # the settings are wrong for every call: stop here
            _print_error(str(exc))
            return 2
        except InputError as exc:  # this scenario is wrong: it fails alone
            row.error = str(exc)
            _print_error(row.error)
            continue
        _print_result(console, row.result, args.timeline, f"[{number}/{len(scenarios)}]")
    _print_summary(console, rows, time.perf_counter() - started, trace_dir)
    if any(row.error for row in rows):
        return 2
    return 1 if any(row.result is not None and not row.result.as_expected for row in rows) else 0


def _mark(result: CallResult) -> str:
    return "[green]as expected[/green]" if result.as_expected else _NOT_AS_EXPECTED


def _controls(result: CallResult) -> str:
    return ", ".join(sorted(result.active_controls)) or "none"


def _print_result(console: Console, result: CallResult, timeline: str | None, counter: str) -> None:
    heading = f"[dim]{counter}[/dim] {result.scenario}: {result.outcome} (expected {result.expected})"
    console.print(f"{heading}  {_mark(result)}", highlight=False)
    if timeline not in {"short", "full"} and (timeline is not None or result.as_expected):
        return
    console.rule(result.scenario)
    console.print(f"controls: {_controls(result)}", highlight=False)
    for check in result.checks:
        sign = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"  {sign} {check.name}: {check.detail}", highlight=False)
    if result.trace_path is not None and result.trace_path.exists():
        render_timeline(Timeline.load(result.trace_path), console=console, full=timeline == "full")


def _print_summary(console: Console, rows: list[_Row], wall_secs: float, trace_dir: Path) -> None:
    table = Table(title="simulated calls", header_style="bold", title_justify="left")
    columns = ("scenario", "controls", "outcome", "expected", "", "decisions", "simulated s", "wall s")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index < 5 else "right")
    for row in rows:
        result = row.result
        if result is None:
            table.add_row(row.name, "", "[red]error[/red]", "", "[red]could not run[/red]", "", "", "")
            continue
        outcome = "[green]pass[/green]" if result.passed else "[yellow]fail[/yellow]"
        figures = str(len(result.decisions)), f"{result.virtual_secs:.1f}", f"{result.wall_secs:.2f}"
        table.add_row(result.scenario, _controls(result), outcome, result.expected, _mark(result), *figures)
    console.print(table)
    results = [row.result for row in rows if row.result is not None]
    mismatched = [r for r in results if not r.as_expected]
    errors = [row for row in rows if row.error]
    console.print(f"{len(results)} calls in {wall_secs:.1f} s wall ({sum(r.virtual_secs for r in results):.0f} s "
                  f"simulated): {len(results) - len(mismatched)} as expected, {len(mismatched)} not as expected"
                  + (f", {len(errors)} could not run" if errors else "") + f". Traces in {trace_dir}/", highlight=False)
    heard = {row.name: row.heard for row in rows}
    for result in mismatched:
        verdict = f"{_NOT_AS_EXPECTED} {result.scenario}: outcome {result.outcome}, expected {result.expected}"
        console.print(verdict, highlight=False)
        if heard.get(result.scenario):
            console.print(Text(f"  the recogniser wrote: {' | '.join(heard[result.scenario])}"))
    for row in errors:
        console.print(Text.assemble(("COULD NOT RUN ", "red"), row.error))
