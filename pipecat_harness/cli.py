"""The ``pipecat-harness`` command.

Each subcommand lives next to the code it drives and registers itself through
an ``add_parser(subparsers)`` function listed in :data:`COMMANDS`; the function
sets ``func`` on its parser, which returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "main"]

#: Subcommand modules, each with ``add_parser(subparsers)``.
COMMANDS: tuple[str, ...] = (
    "pipecat_harness.proxy.command",
    "pipecat_harness.sim.command",
    "pipecat_harness.trace.command",
    "pipecat_harness.grader.command",
    "pipecat_harness.eval.command",
    "pipecat_harness.business.command",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="pipecat-harness",
        description="Controls for Pipecat voice agents: simulate calls, evaluate controls, serve the proxy.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        importlib.import_module(module).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    from loguru import logger

    # Pipecat logs every frame at DEBUG; a command line shows warnings only unless asked.
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_HARNESS_LOG_LEVEL", "WARNING"))
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
