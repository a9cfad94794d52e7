"""Offline call simulation: scenarios, a scripted LLM, simulated TTS and transport, virtual time."""

from pipecat_harness.sim.caller_goal import CallerGoal
from pipecat_harness.sim.clock import LoopClock, VirtualTimeLoop, virtual_time
from pipecat_harness.sim.goal_caller import GoalCallerSettings
from pipecat_harness.sim.model_arm import ModelArm, ModelArmError
from pipecat_harness.sim.runner import CallResult, CheckResult, run_scenario, simulate_call
from pipecat_harness.sim.scenario import Scenario, ScenarioError, bundled_scenario_paths, load_scenario, load_scenarios
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService, SpeechLedger

__all__ = ["CallResult", "CallerGoal", "CheckResult", "GoalCallerSettings", "LoopClock", "ModelArm", "ModelArmError",
           "Scenario", "ScenarioError", "ScriptedLLMService", "SimulatedOutputTransport", "SimulatedTTSService",
           "SpeechLedger", "VirtualTimeLoop", "bundled_scenario_paths", "load_scenario", "load_scenarios",
           "run_scenario", "simulate_call", "virtual_time"]
