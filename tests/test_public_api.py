"""The public surface is a contract: names may be added deliberately, never lost by accident."""

import importlib

import pipecat_harness

EXPECTED = {
    "__version__", "Harness", "HarnessConfig", "ConfigError", "CONTROL_NAMES", "HarnessControl", "Placement",
    "ControlDecision", "DecisionLog", "TraceRecorder", "Timeline",
    "hold_decision", "IdentifierHoldConfig", "IdentifierHoldStopStrategy", "SpellingNormalizer", "SilentReplyGuard",
    "ToolGate", "OperationLedger", "estimate_heard_prefix", "PlaybackTracker", "HistoryCorrector",
    "ChecklistDirector", "RuleGrader", "ConstraintList", "TurnGrader",
}

#: The lab's names, reached through their own modules (the ``lab`` extra), never through the top level.
LAB_NAMES = {
    "pipecat_harness.sim.scenario": ["Scenario", "ScenarioError", "load_scenario", "load_scenarios"],
    "pipecat_harness.sim.runner": ["run_scenario", "CallResult"],
    "pipecat_harness.sim.scripted_llm": ["ScriptedLLMService"],
    "pipecat_harness.sim.sim_tts": ["SimulatedTTSService"],
    "pipecat_harness.sim.sim_transport": ["SimulatedOutputTransport"],
    "pipecat_harness.sim.clock": ["LoopClock", "virtual_time"],
    "pipecat_harness.demo.retail_db": ["RetailDatabase"],
    "pipecat_harness.demo.retail_tools": ["RetailTools"],
}


def test_top_level_names_are_exactly_the_documented_ones():
    assert set(pipecat_harness.__all__) == EXPECTED


def test_the_top_level_holds_no_simulator_or_demo_name():
    for module_name, names in LAB_NAMES.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert hasattr(module, name), f"{module_name}.{name}"
            assert name not in pipecat_harness.__all__, name
            assert not hasattr(pipecat_harness, name), name
    lab = ("pipecat_harness.sim", "pipecat_harness.demo", "pipecat_harness.eval", "pipecat_harness.replay",
           "pipecat_harness.fakes", "pipecat_harness.proxy")
    assert not [m for m in pipecat_harness._EXPORTS.values() if m.startswith(lab)]


def test_every_exported_name_resolves():
    for name in pipecat_harness.__all__:
        assert getattr(pipecat_harness, name) is not None, name


def test_every_public_module_declares_all():
    for module_name in ["config", "control", "decisions", "harness", "cli", "sim.clock", "sim.scenario",
                        "sim.runner", "sim.scripted_llm", "sim.sim_tts", "sim.sim_transport", "sim.caller",
                        "trace.recorder", "trace.timeline", "trace.show", "demo.retail_db", "demo.retail_tools",
                        "input", "tools", "history", "retrieval", "retrieval.tool", "retrieval.labeled",
                        "business", "business.handoff", "trace.handoff", "business.control", "demo.callbacks",
                        "demo.policies", "grader", "checklist", "proxy", "state", "eval", "spoken",
                        "validation"]:
        module = importlib.import_module(f"pipecat_harness.{module_name}")
        assert hasattr(module, "__all__"), module_name
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.{name}"
