"""Recorded calls, replayed: a decision point under treatments, and a whole call as a scenario."""

from pipecat_harness.replay.actions import NextAction, ReferenceAction, ToolCall
from pipecat_harness.replay.decision_point import DecisionPoint, ReplayError, decision_point, decision_points
from pipecat_harness.replay.from_trace import scenario_from_trace
from pipecat_harness.replay.treatments import TREATMENTS, ReplayTable, TreatmentResult, replay_decision

__all__ = ["TREATMENTS", "DecisionPoint", "NextAction", "ReferenceAction", "ReplayError", "ReplayTable", "ToolCall",
           "TreatmentResult", "decision_point", "decision_points", "replay_decision", "scenario_from_trace"]
