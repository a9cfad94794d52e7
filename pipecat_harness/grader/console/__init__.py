"""The operator console: flagged turns, newest first, with acknowledge, override and escalate."""

from pipecat_harness.grader.console.app import create_console_app

__all__ = ["create_console_app"]
