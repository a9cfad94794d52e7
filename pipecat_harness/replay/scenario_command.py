"""``pipecat-harness scenario from-trace``: write the scenario a recorded call becomes; exit 0, or 2 on bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pipecat_harness.replay.from_trace import scenario_from_trace
from pipecat_harness.sim.scenario import Scenario, ScenarioError, bundled_scenario_paths, load_scenario
from pipecat_harness.trace.timeline import Timeline
from pipecat_harness.validation import describe_validation_error

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> None:
    """Register ``scenario`` and its subcommands."""
    parser = subparsers.add_parser("scenario", help="make scenarios (from a recorded call's trace)")
    sub = parser.add_subparsers(dest="scenario_command", metavar="SUBCOMMAND")
    from_trace = sub.add_parser(
        "from-trace", help="write the scenario a recorded call becomes",
        description="Write the caller side of a recorded call exactly (speech, pauses, barge-ins, silent speech, "
        "recognised text) and the model side as its recorded decisions, so the call replays with each control on "
        "and off.")
    add = from_trace.add_argument
    add("trace", help="a JSONL trace of a simulated or real call")
    add("-o", "--output", help="the scenario file to write (default: print it)")
    add("--scenario", help="the scenario the call ran, for its business database, tools and expectations (default: "
        "the bundled scenario the trace names, if any)")
    add("--name", help="the new scenario's name (default: <scenario>_replayed)")
    add("--live-model", action="store_true",
        help="leave the recorded decisions out: a real model answers (eval --model)")
    add("--model", metavar="PROVIDER:NAME", help="the real model that will answer (gemini:NAME or openai:NAME): "
        "implies --live-model and names the model in the scenario's description")
    from_trace.set_defaults(func=_from_trace)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _source(timeline: Timeline, given: str | None) -> Scenario | None:
    if given:
        return load_scenario(given)
    name = str(timeline.call.get("scenario") or "")
    path = next((p for p in bundled_scenario_paths() if p.stem == name), None)
    return load_scenario(path) if path is not None else None


def _from_trace(args: argparse.Namespace) -> int:
    timeline = Timeline.load(args.trace)
    source = _source(timeline, args.scenario)
    if args.model is not None and (":" not in args.model or args.model.split(":", 1)[0] not in ("gemini", "openai")):
        raise ScenarioError(f"--model {args.model!r}: write it as gemini:NAME or openai:NAME")
    live = args.live_model or args.model is not None
    raw = scenario_from_trace(timeline, name=args.name, source=source, live_model=live)
    if args.model is not None:
        raw["description"] += f" Its model side is live: run it with 'pipecat-harness eval --model {args.model}'."
    if not raw["caller"]:
        raise ScenarioError(f"{args.trace}: the trace records no caller speech (speech_started/speech_stopped); "
                            "there is no caller side to replay")
    try:
        Scenario.model_validate(raw)
    except ValidationError as exc:
        problem = describe_validation_error(exc, model=Scenario)
        raise ScenarioError(f"{args.trace}: the scenario it gives is not valid: {problem}") from exc
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=120)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        used = f" (business and expectations from {source.source})" if source is not None else ""
        print(f"wrote {args.output}{used}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
