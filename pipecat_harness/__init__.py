"""pipecat-harness: controls that make Pipecat voice agents safe on real phone lines.

The model decides what to say; the harness owns what the model cannot see for itself: whether the caller's input is
complete, whether an action already executed, and what the caller actually heard.

Public names are imported lazily, so ``import pipecat_harness`` stays cheap and a control's dependencies load only when
it is used. The simulator, the retail demo and the other lab tools are imported from their modules
(``pipecat_harness.sim.runner.run_scenario``, ``pipecat_harness.demo.retail_tools.RetailTools``), with the ``lab``
extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The lazily imported public names, by the module (under ``pipecat_harness``) that defines them.
_NAMES_BY_MODULE: dict[str, tuple[str, ...]] = {
    # foundation
    "harness": ("Harness",),
    "config": ("HarnessConfig", "ConfigError", "CONTROL_NAMES"),
    "control": ("HarnessControl", "Placement"),
    "decisions": ("ControlDecision", "DecisionLog"),
    "trace.recorder": ("TraceRecorder",),
    "trace.timeline": ("Timeline",),
    # controls, checklist and grader
    "input": ("hold_decision", "IdentifierHoldConfig", "IdentifierHoldStopStrategy", "SpellingNormalizer",
              "SilentReplyGuard"),
    "tools": ("ToolGate", "OperationLedger"),
    "history": ("estimate_heard_prefix", "PlaybackTracker", "HistoryCorrector"),
    "checklist": ("ChecklistDirector",),
    "grader": ("RuleGrader", "ConstraintList", "TurnGrader"),
}
_EXPORTS: dict[str, str] = {name: f"pipecat_harness.{module}" for module, names in _NAMES_BY_MODULE.items()
                            for name in names}

__all__ = ["CONTROL_NAMES", "ChecklistDirector", "ConfigError", "ConstraintList", "ControlDecision", "DecisionLog",
           "Harness", "HarnessConfig", "HarnessControl", "HistoryCorrector", "IdentifierHoldConfig",
           "IdentifierHoldStopStrategy", "OperationLedger", "Placement", "PlaybackTracker", "RuleGrader",
           "SilentReplyGuard", "SpellingNormalizer", "Timeline", "ToolGate", "TraceRecorder", "TurnGrader",
           "__version__", "estimate_heard_prefix", "hold_decision"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pipecat_harness' has no attribute {name!r}")
    from pipecat_harness.errors import import_or_name_extra

    value = getattr(import_or_name_extra(module, f"pipecat_harness.{name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from pipecat_harness.checklist import ChecklistDirector
    from pipecat_harness.config import CONTROL_NAMES, ConfigError, HarnessConfig
    from pipecat_harness.control import HarnessControl, Placement
    from pipecat_harness.decisions import ControlDecision, DecisionLog
    from pipecat_harness.grader import ConstraintList, RuleGrader, TurnGrader
    from pipecat_harness.harness import Harness
    from pipecat_harness.history import HistoryCorrector, PlaybackTracker, estimate_heard_prefix
    from pipecat_harness.input import (
        IdentifierHoldConfig,
        IdentifierHoldStopStrategy,
        SilentReplyGuard,
        SpellingNormalizer,
        hold_decision,
    )
    from pipecat_harness.tools import OperationLedger, ToolGate
    from pipecat_harness.trace.recorder import TraceRecorder
    from pipecat_harness.trace.timeline import Timeline
