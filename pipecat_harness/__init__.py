"""pipecat-harness: controls that make Pipecat voice agents safe on real phone lines.

The model decides what to say; the harness owns what the model cannot see for
itself: whether the caller's input is complete, whether an action already
executed, and what the caller actually heard.

Public names are imported lazily, so ``import pipecat_harness`` stays cheap and
a control's dependencies load only when it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # foundation
    "Harness": "pipecat_harness.harness",
    "HarnessConfig": "pipecat_harness.config",
    "ConfigError": "pipecat_harness.config",
    "CONTROL_NAMES": "pipecat_harness.config",
    "HarnessControl": "pipecat_harness.control",
    "Placement": "pipecat_harness.control",
    "ControlDecision": "pipecat_harness.decisions",
    "DecisionLog": "pipecat_harness.decisions",
    "TraceRecorder": "pipecat_harness.trace.recorder",
    "Timeline": "pipecat_harness.trace.timeline",
    # simulation
    "Scenario": "pipecat_harness.sim.scenario",
    "ScenarioError": "pipecat_harness.sim.scenario",
    "load_scenario": "pipecat_harness.sim.scenario",
    "load_scenarios": "pipecat_harness.sim.scenario",
    "run_scenario": "pipecat_harness.sim.runner",
    "CallResult": "pipecat_harness.sim.runner",
    "ScriptedLLMService": "pipecat_harness.sim.scripted_llm",
    "SimulatedTTSService": "pipecat_harness.sim.sim_tts",
    "SimulatedOutputTransport": "pipecat_harness.sim.sim_transport",
    "LoopClock": "pipecat_harness.sim.clock",
    "virtual_time": "pipecat_harness.sim.clock",
    # retail demo backend
    "RetailDatabase": "pipecat_harness.demo.retail_db",
    "RetailTools": "pipecat_harness.demo.retail_tools",
    # input controls
    "hold_decision": "pipecat_harness.input",
    "IdentifierHoldConfig": "pipecat_harness.input",
    "IdentifierHoldStopStrategy": "pipecat_harness.input",
    "SpellingNormalizer": "pipecat_harness.input",
    "SilentReplyGuard": "pipecat_harness.input",
    # tool controls
    "ToolGate": "pipecat_harness.tools",
    "OperationLedger": "pipecat_harness.tools",
    # history controls
    "estimate_heard_prefix": "pipecat_harness.history",
    "PlaybackTracker": "pipecat_harness.history",
    "HistoryCorrector": "pipecat_harness.history",
    # checklist and grader
    "ChecklistDirector": "pipecat_harness.checklist",
    "RuleGrader": "pipecat_harness.grader",
    "ConstraintList": "pipecat_harness.grader",
    "TurnGrader": "pipecat_harness.grader",
}

__all__ = [
    "CONTROL_NAMES",
    "CallResult",
    "ChecklistDirector",
    "ConfigError",
    "ConstraintList",
    "ControlDecision",
    "DecisionLog",
    "Harness",
    "HarnessConfig",
    "HarnessControl",
    "HistoryCorrector",
    "IdentifierHoldConfig",
    "IdentifierHoldStopStrategy",
    "LoopClock",
    "OperationLedger",
    "Placement",
    "PlaybackTracker",
    "RetailDatabase",
    "RetailTools",
    "RuleGrader",
    "Scenario",
    "ScenarioError",
    "ScriptedLLMService",
    "SilentReplyGuard",
    "SimulatedOutputTransport",
    "SimulatedTTSService",
    "SpellingNormalizer",
    "Timeline",
    "ToolGate",
    "TraceRecorder",
    "TurnGrader",
    "__version__",
    "estimate_heard_prefix",
    "hold_decision",
    "load_scenario",
    "load_scenarios",
    "run_scenario",
    "virtual_time",
]


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
    from pipecat_harness.demo.retail_db import RetailDatabase
    from pipecat_harness.demo.retail_tools import RetailTools
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
    from pipecat_harness.sim.clock import LoopClock, virtual_time
    from pipecat_harness.sim.runner import CallResult, run_scenario
    from pipecat_harness.sim.scenario import Scenario, ScenarioError, load_scenario, load_scenarios
    from pipecat_harness.sim.scripted_llm import ScriptedLLMService
    from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
    from pipecat_harness.sim.sim_tts import SimulatedTTSService
    from pipecat_harness.tools import OperationLedger, ToolGate
    from pipecat_harness.trace.recorder import TraceRecorder
    from pipecat_harness.trace.timeline import Timeline
