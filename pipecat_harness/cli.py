"""The ``pipecat-harness`` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pipecat_harness.errors import InputError, import_or_name_extra

__all__ = ["COMMANDS", "Command", "build_parser", "main", "port_number"]


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, the module whose ``add_parser`` registers it, its help and the extra it needs."""

    name: str
    module: str
    help: str
    extra: str | None = None


#: The subcommands, in the order ``--help`` lists them.
COMMANDS: tuple[Command, ...] = (
    Command("simulate", "pipecat_harness.sim.command",
            "run simulated calls (bundled scenarios by default) and check their outcomes", extra="lab"),
    Command("eval", "pipecat_harness.eval.command",
            "A/B evaluation: each control on and off over the scenarios, benefit and cost per control", extra="lab"),
    Command("trace", "pipecat_harness.trace.command", "inspect call timelines (terminal or HTML)", extra="lab"),
    Command("scenario", "pipecat_harness.replay.scenario_command",
            "make scenarios: 'scenario from-trace TRACE' turns a recorded call into one", extra="lab"),
    Command("replay", "pipecat_harness.replay.command",
            "re-run the model at a recorded decision point under treatments (none, reminder, feedback)", extra="lab"),
    Command("proxy", "pipecat_harness.proxy.command",
            "serve the custom-LLM proxy for Vapi and Retell (needs pipecat-harness[proxy])", extra="proxy"),
    Command("grader", "pipecat_harness.grader.command", "per-turn grader tools", extra="sqlite"),
    Command("handoff", "pipecat_harness.business.command",
            "print a call's verified handoff summary (every line linked to its record)"),
    Command("console", "pipecat_harness.grader.command",
            "serve the operator console of flagged turns (needs pipecat-harness[proxy])", extra="proxy"),
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors say what to type, in one line, with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def port_number(text: str) -> int:
    """An ``argparse`` type for a TCP port to listen on (0 picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port; give a number from 1 to 65535")
    return port


def _command_named(name: str | None) -> Command | None:
    return next((c for c in COMMANDS if c.name == name), None)


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser, importing only the ``selected`` command's module (the others are listed by name)."""
    description = "Controls for Pipecat voice agents: simulate calls, evaluate controls, serve the proxy."
    parser = _Parser(prog="pipecat-harness", description=description)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    command = _command_named(selected)
    if command is not None:
        import_or_name_extra(command.module, f"pipecat-harness {command.name}", command.extra).add_parser(subparsers)
    for other in COMMANDS:
        if other.name not in subparsers.choices:
            subparsers.add_parser(other.name, help=other.help, add_help=False)
    return parser


def _selected_command(argv: Sequence[str]) -> str | None:
    # The first argument that is no option names the subcommand (options before it take no values).
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if _command_named(first) else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    from loguru import logger

    # Pipecat logs every frame at DEBUG; a command line shows warnings only unless asked.
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_HARNESS_LOG_LEVEL", "WARNING"))
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_selected_command(argv))
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"pipecat-harness: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
