"""Evaluation: switch one control at a time over many simulated calls and report benefit and cost."""

from pipecat_harness.eval.metrics import CallMetrics, measure_call
from pipecat_harness.eval.rules import DecisionRules, load_rules
from pipecat_harness.eval.runner import EvalRun, arm_controls, run_evaluation
from pipecat_harness.eval.variation import TimingVariation, vary_scenario

__all__ = ["CallMetrics", "DecisionRules", "EvalRun", "TimingVariation", "arm_controls", "load_rules", "measure_call",
           "run_evaluation", "vary_scenario"]
