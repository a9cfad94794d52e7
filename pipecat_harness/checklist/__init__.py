"""Checklist driver: tell the model the next question, in Pipecat and behind a proxy.

``ChecklistDirector`` is imported on first use: the proxy and workers that only need the driver skip Pipecat.
"""

from typing import Any

from pipecat_harness.checklist.analysis import Analysis, Analyzer, AnalyzerError, ItemUpdate
from pipecat_harness.checklist.directive import DEFAULT_MARKER, Directive, mark_issued, next_directive
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.llm_analyzer import GeminiAnalyzer
from pipecat_harness.checklist.model import (
    Checklist,
    ChecklistError,
    ClosingStep,
    Location,
    Question,
    Section,
    bundled_checklist,
    load_checklist,
)
from pipecat_harness.checklist.progress import ChecklistState, ItemState, ItemStatus, apply_analysis
from pipecat_harness.checklist.prompt import strip_directives
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer

__all__ = ["DEFAULT_MARKER", "Analysis", "Analyzer", "AnalyzerError", "Checklist", "ChecklistDirector",
           "ChecklistDriver", "ChecklistError", "ChecklistState", "ClosingStep", "Directive", "GeminiAnalyzer",
           "ItemState", "ItemStatus", "ItemUpdate", "Location", "Question", "RuleAnalyzer", "Section", "apply_analysis",
           "bundled_checklist", "load_checklist", "mark_issued", "next_directive", "strip_directives"]


def __getattr__(name: str) -> Any:
    if name == "ChecklistDirector":
        from pipecat_harness.checklist.director import ChecklistDirector

        return ChecklistDirector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
