"""The operator console: flagged turns, newest first, with acknowledge, override and escalate."""

from pipecat_harness.grader.console.access import ConsoleAccess, Scope
from pipecat_harness.grader.console.app import create_console_app

__all__ = ["ConsoleAccess", "Scope", "create_console_app"]
