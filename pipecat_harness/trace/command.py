"""``pipecat-harness trace show FILE``: read a call timeline in the terminal."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console

from pipecat_harness.trace.html import add_html_parser
from pipecat_harness.trace.show import render_timeline
from pipecat_harness.trace.timeline import LANES, Timeline

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> None:
    """Register ``trace`` and its subcommands."""
    parser = subparsers.add_parser("trace", help="inspect call timelines")
    trace_sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    show = trace_sub.add_parser("show", help="render a JSONL call timeline in the terminal")
    show.add_argument("file", help="a trace file written by a simulated or real call")
    show.add_argument("--full", action="store_true", help="include interims, played words and model inputs")
    show.add_argument("--lane", action="append", choices=LANES, help="only these lanes (repeatable)")
    show.set_defaults(func=_show)
    add_html_parser(trace_sub)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _show(args: argparse.Namespace) -> int:
    timeline = Timeline.load(args.file)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    render_timeline(timeline, console=console, full=args.full, lanes=set(args.lane) if args.lane else None)
    return 0
