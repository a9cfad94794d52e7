"""``pipecat-harness handoff TRACE``: the verified handoff summary of a call."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pipecat_harness.trace.handoff import build_handoff
from pipecat_harness.trace.timeline import Timeline

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> None:
    """Register ``handoff``."""
    parser = subparsers.add_parser("handoff",
                                   help="print a call's verified handoff summary (each line linked to its record)")
    parser.add_argument("trace", help="a trace file written by a simulated or real call")
    parser.add_argument("--json", action="store_true", help="print JSON with the links")
    parser.set_defaults(func=_handoff)


def _handoff(args: argparse.Namespace) -> int:
    try:
        timeline = Timeline.load(args.trace)
    except ValueError as exc:  # a missing or unreadable file is a TraceFileError, a ValueError too
        print(f"pipecat-harness: {exc}", file=sys.stderr)
        return 2
    handoff = build_handoff(timeline)
    print(json.dumps(handoff.to_dict(), indent=2, ensure_ascii=False) if args.json else handoff.to_text())
    return 0
