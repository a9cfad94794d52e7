"""The verified handoff summary, at its earlier import path: it lives in :mod:`pipecat_harness.trace.handoff`."""

from pipecat_harness.trace.handoff import SECTIONS, Handoff, HandoffLine, Link, build_handoff

__all__ = ["SECTIONS", "Handoff", "HandoffLine", "Link", "build_handoff"]
