"""``pipecat-harness simulate``: run simulated calls offline and check their business outcomes."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from pipecat_harness.config import CONTROL_NAMES, ConfigError, HarnessConfig
from pipecat_harness.sim.runner import SIM_SERVICES, CallResult, run_scenario
from pipecat_harness.sim.scenario import ScenarioError, load_scenarios
from pipecat_harness.trace.show import render_timeline
from pipecat_harness.trace.timeline import Timeline

__all__ = ["add_parser", "quiet_pipecat_logs"]


def quiet_pipecat_logs(verbose: bool = False) -> None:
    """Keep Pipecat's per-frame logging off the terminal unless asked for."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if verbose else "ERROR")


def add_parser(subparsers: Any) -> None:
    """Register ``simulate``."""
    parser = subparsers.add_parser(
        "simulate",
        help="run simulated calls (bundled scenarios by default) and check their outcomes",
        description="Run each scenario as a call through a real Pipecat pipeline on virtual time, with no keys "
        "and no network. Exits non-zero when a call's outcome differs from what the scenario expects with the "
        "active controls.",
    )
    parser.add_argument("scenarios", nargs="*", help="scenario files or directories (default: the bundled set)")
    parser.add_argument("--config", help="a HarnessConfig YAML file (default: each scenario domain's preset)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--controls", help=f"comma-separated controls to enable, the rest off ({', '.join(CONTROL_NAMES)})"
    )
    group.add_argument("--no-controls", action="store_true", help="run with every control off")
    parser.add_argument("--without", action="append", default=[], metavar="CONTROL", help="switch one control off")
    parser.add_argument("--services", choices=SIM_SERVICES, default="scripted",
                        help="scripted: the simulator's own LLM and TTS; loopback: the bots' Deepgram, Gemini and "
                             "ElevenLabs services against protocol fakes on 127.0.0.1 (loopback-openai: "
                             "OpenAILLMService instead of Gemini)")
    parser.add_argument("--traces", default="traces", help="directory for call timelines (default: ./traces)")
    parser.add_argument("--timeline", choices=["short", "full", "none"], default="short",
                        help="timeline printed per call (default: short)")
    parser.add_argument("--audio", action="store_true",
                        help="voice the caller with Piper and recognise it with Silero VAD and Whisper tiny.en "
                        "(needs the [audio] extra; audio and transcripts are cached)")
    parser.add_argument("--turn-stop", choices=["speech_timeout", "smart_turn"], default="speech_timeout",
                        help="with --audio: the stop strategy (default: speech_timeout)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Pipecat's logs")
    parser.set_defaults(func=_simulate)


def _config_for(args: argparse.Namespace, domain: str) -> tuple[HarnessConfig, list[str] | None]:
    config = HarnessConfig.from_yaml(args.config) if args.config else HarnessConfig.preset(domain)  # type: ignore[arg-type]
    controls: list[str] | None = None
    if args.no_controls:
        controls = []
    elif args.controls is not None:
        controls = [c.strip() for c in args.controls.split(",") if c.strip()]
    if args.without:
        config = config.with_controls(**{name: False for name in args.without})
    if controls is not None:
        config = config.with_controls(**{name: name in controls for name in CONTROL_NAMES})
    return config, controls


def _simulate(args: argparse.Namespace) -> int:
    quiet_pipecat_logs(args.verbose)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        scenarios = load_scenarios(args.scenarios or None)
        unknown = {c.strip() for c in (args.controls or "").split(",") if c.strip()} | set(args.without)
        unknown -= set(CONTROL_NAMES)
        if unknown:
            raise ConfigError(f"unknown control(s) {sorted(unknown)}; controls are {list(CONTROL_NAMES)}")
    except (ScenarioError, ConfigError) as exc:
        console.print(f"[red]pipecat-harness: {exc}[/red]")
        return 2
    if not scenarios:
        console.print("[red]pipecat-harness: no scenario files found[/red]")
        return 2
    audio = None
    if getattr(args, "audio", False):
        from pipecat_harness.sim.audio import AudioModeUnavailable
        from pipecat_harness.sim.audio.mode import AudioMode

        try:
            audio = AudioMode(turn_stop=args.turn_stop)
        except AudioModeUnavailable as exc:
            console.print(f"[red]pipecat-harness: {exc}[/red]")
            return 2
    trace_dir = Path(args.traces)
    results: list[CallResult] = []
    started = time.perf_counter()
    for scenario in scenarios:
        try:
            config, _ = _config_for(args, scenario.domain)
        except ConfigError as exc:
            console.print(f"[red]pipecat-harness: {exc}[/red]")
            return 2
        result = run_scenario(scenario, config, trace_dir=trace_dir, services=args.services, audio=audio)
        results.append(result)
        _print_result(console, result, args.timeline)
    mismatched = [r for r in results if not r.as_expected]
    console.rule()
    console.print(
        f"{len(results)} calls in {time.perf_counter() - started:.1f} s wall "
        f"({sum(r.virtual_secs for r in results):.0f} s simulated): "
        f"{sum(r.passed for r in results)} outcomes passed, {sum(not r.passed for r in results)} failed, "
        f"{len(results) - len(mismatched)} as expected, {len(mismatched)} not as expected. Traces in {trace_dir}/"
    )
    for result in mismatched:
        console.print(f"[red]NOT AS EXPECTED[/red] {result.scenario}: outcome {result.outcome}, "
                      f"expected {result.expected}")
    return 1 if mismatched else 0


def _print_result(console: Console, result: CallResult, timeline: str) -> None:
    mark = "[green]as expected[/green]" if result.as_expected else "[red]NOT AS EXPECTED[/red]"
    outcome = "[green]pass[/green]" if result.passed else "[yellow]fail[/yellow]"
    controls = ", ".join(sorted(result.active_controls)) or "none"
    console.rule(f"{result.scenario}")
    console.print(f"business outcome: {outcome}  (expected {result.expected} with controls: {controls})  {mark}  "
                  f"[dim]{result.virtual_secs:.1f} s simulated in {result.wall_secs:.2f} s[/dim]")
    for check in result.checks:
        sign = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"  {sign} {check.name}: {check.detail}")
    if timeline != "none" and result.trace_path is not None and result.trace_path.exists():
        render_timeline(Timeline.load(result.trace_path), console=console, full=timeline == "full")
