r"""``pipecat-harness replay TRACE``: re-run the model at a recorded decision point under treatments.

The scripted model is the one of the scenario the call ran (by name, or ``--scenario FILE``), ``--model`` a real one
through Pipecat's service class. Exit status 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pipecat_harness.bundled import BUNDLED_PREFIX, bundled_path
from pipecat_harness.demo.callbacks import CALLBACK_WRITE_TOOLS
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS
from pipecat_harness.replay import replay_decision
from pipecat_harness.replay.actions import ReferenceAction
from pipecat_harness.replay.checks import CHECKS, load_check
from pipecat_harness.replay.decision_point import ReplayError, decision_point, decision_points
from pipecat_harness.replay.treatments import TREATMENTS, ModelSource, ReplayTable, ScriptedSource, ServiceSource
from pipecat_harness.sim.scenario import Scenario, ScenarioError, bundled_scenario_paths, load_scenario
from pipecat_harness.trace.timeline import Timeline

__all__ = ["add_parser", "print_table", "resolve_trace", "scenario_of_trace"]

_DATA = Path(__file__).resolve().parent / "data"


def add_parser(subparsers: Any) -> None:
    """Register ``replay``."""
    parser = subparsers.add_parser(
        "replay", help="re-run the model at a recorded decision point under treatments (none, reminder, feedback)",
        description="Rebuild what the model received at one model request of a trace, re-run the model there "
        "N times per treatment (none; the check's rule appended to the system instruction; the check's feedback "
        "returned at the tool call) and tabulate its next action. The reference action (--expect) is read by the "
        "scorer only, never given to the model.")
    add = parser.add_argument
    add("trace", help="a JSONL trace, or bundled:NAME (bundled:cancel_two_orders)")
    add("--list", action="store_true", help="list the trace's model requests and exit")
    add("--at", type=int, help="the model request to replay (its number in --list)")
    treatments = ",".join(TREATMENTS)
    add("--treatment", default=treatments, help=f"comma-separated treatments (default: {treatments})")
    add("--samples", type=int, default=3, help="samples per treatment (default 3)")
    add("--check", default="tool_gate", help=f"the check at the tool call: {', '.join(CHECKS)}, or module:function "
        "returning policy rules for a decision point (default: tool_gate)")
    add("--reminder", help="the reminder text (default: the check's rule in words)")
    add("--expect", help="the reference next action, for the scorer: tool:NAME, say:REGEX or no_tool:NAME, "
        "alternatives joined with |")
    add("--model", default="scripted",
        help="scripted (default), gemini:NAME or openai:NAME (key from GOOGLE_API_KEY / OPENAI_API_KEY)")
    add("--base-url", help="with --model openai:NAME: an OpenAI-compatible endpoint")
    add("--temperature", type=float, default=1.0, help="sampling temperature of a real model (default 1.0)")
    add("--seed", type=int, default=0, help="base seed; sample i uses seed + i (default 0)")
    add("--scenario", help="the scenario whose scripted model to replay (default: the one the trace names)")
    add("--json", dest="json_out", metavar="FILE", help="also write the table and every sample")
    parser.set_defaults(func=_replay)


def resolve_trace(value: str) -> Path:
    """A trace path, or the bundled recorded call ``bundled:NAME`` names (an ``InputError`` if there is none)."""
    return bundled_path("recorded call", value) if value.startswith(BUNDLED_PREFIX) else Path(value)


def scenario_of_trace(timeline: Timeline, trace: Path, given: str | None) -> Scenario:
    """The scenario a call ran: ``--scenario``, one beside the trace or a bundled one (else a ``ReplayError``)."""
    if given:
        return load_scenario(given)
    name = str(timeline.call.get("scenario") or "")
    bundled = [p for p in bundled_scenario_paths() if p.stem == name]
    for path in [trace.with_suffix(".yaml"), _DATA / f"{name}.yaml", *bundled] if name else []:
        if path.exists() and (scenario := load_scenario(path)).name == name:
            return scenario
    raise ReplayError(f"{trace}: the scripted model needs the scenario the call ran ({name or 'the trace names none'})"
                      "; give --scenario FILE, or --model gemini:NAME / openai:NAME for a real model")


def _live_source(args: argparse.Namespace) -> ModelSource:
    try:
        from pipecat_harness.sim.model_arm import ModelArm
    except ImportError as exc:  # the model arm ships with the evaluation's real-model support
        raise ReplayError(f"--model {args.model}: a real model needs pipecat_harness.sim.model_arm, which this "
                          f"installation lacks ({exc}); use --model scripted") from exc
    arm = ModelArm.parse(args.model, base_url=args.base_url, temperature=args.temperature, seed=args.seed)

    def build(system: str | None, sample: int) -> Any:
        return replace(arm, seed=arm.seed + sample).build_service(system)

    settings = {"temperature": arm.temperature, "seed": arm.seed, "seed_per_sample": "seed + sample"}
    return ServiceSource(arm.label, build, settings=settings)


def _write_tools(timeline: Timeline, scenario: Scenario | None) -> frozenset[str]:
    tools = set(RETAIL_WRITE_TOOLS | CALLBACK_WRITE_TOOLS)
    if scenario is not None:
        tools |= {tool.name for tool in scenario.own_tools if tool.write}
    for event in timeline.of("decision", lane="control"):
        if event.data.get("control") == "tool_gate" and (event.data.get("evidence") or {}).get("write"):
            tools.add(str(event.data["evidence"].get("tool")))
    return frozenset(tools)


def _replay(args: argparse.Namespace) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=150)
    trace = resolve_trace(args.trace)
    timeline = Timeline.load(trace)
    if args.list:
        for point in decision_points(timeline):
            console.print(point.describe(), highlight=False, markup=False)
        return 0
    if args.at is None:
        raise ReplayError("give --at N, the model request to replay ('--list' shows them)")
    point = decision_point(timeline, args.at, source=str(trace))
    treatments = [t.strip() for t in args.treatment.split(",") if t.strip()]
    check = load_check(args.check, reminder=args.reminder)
    reference = ReferenceAction.parse(args.expect) if args.expect else None
    scenario: Scenario | None = None
    source: ModelSource
    try:
        if args.model == "scripted":
            scenario = scenario_of_trace(timeline, trace, args.scenario)
            source = ScriptedSource(scenario.model, seed=args.seed, label=f"scripted ({scenario.name})")
        else:
            source = _live_source(args)
    except ScenarioError as exc:
        raise ReplayError(str(exc)) from exc
    table = replay_decision(point, source, treatments=treatments, samples=args.samples, check=check,
                            reference=reference, write_tools=_write_tools(timeline, scenario), trace=str(trace))
    print_table(table, console)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(table.to_dict(), indent=1, default=str), encoding="utf-8")
        console.print(f"samples written to {args.json_out}", highlight=False, markup=False)
    return 0


def print_table(table: ReplayTable, console: Console | None = None) -> None:
    """Print the treatment table of a replay."""
    console = console or Console()
    point = table.point
    scorer = [f"reference action (scorer only): {table.reference.source}"] if table.reference is not None else []
    settings = f'model: {table.model}; check: {table.check}; reminder: "{table.reminder}"'
    for line in (f"decision point {point.describe()}", settings, *scorer):
        console.print(line, highlight=False, markup=False)
    grid = Table(title=f"replay of {table.trace} at model request #{point.index}", title_justify="left")
    scored = "next action = reference" if table.reference else "next action"
    for column in ("treatment", scored, "changed from recorded", "model requests"):
        grid.add_column(column)
    grid.add_column("next actions (count)", overflow="fold")
    for result in table.results:
        n = len(result.samples)
        score = f"{result.matched}/{n}" if table.reference else "-"
        actions = "; ".join(f"{label} ×{count}" for label, count in result.actions())
        changed, requests = f"{result.changed_from(point.recorded)}/{n}", str(sum(s.requests for s in result.samples))
        grid.add_row(result.treatment, score, changed, requests, actions)
    console.print(grid)
