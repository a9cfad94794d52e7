"""An instruction entry a control keeps in an LLM service's composed system instruction."""

from __future__ import annotations

from pipecat_harness.instruction import InstructionEntry
from pipecat_harness.sim.scenario import ModelScript
from pipecat_harness.sim.scripted_llm import ScriptedLLMService


def _llm() -> ScriptedLLMService:
    return ScriptedLLMService(ModelScript.model_validate({}), system_instruction="Base prompt.")


def test_an_entry_is_replaced_in_place_and_removed_without_touching_the_base_or_other_entries():
    llm = _llm()
    state, notes = InstructionEntry(llm), InstructionEntry(llm)
    state.set("State v1")
    notes.set("Same text")
    state.set("Same text")  # equal texts stay two entries
    assert llm._settings.system_instruction == "Base prompt.\n\nSame text\n\nSame text"
    state.set("State v2")
    assert llm._settings.system_instruction == "Base prompt.\n\nState v2\n\nSame text"
    notes.set(None)
    assert llm._settings.system_instruction == "Base prompt.\n\nState v2" and notes.text is None
