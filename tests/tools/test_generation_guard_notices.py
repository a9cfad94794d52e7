"""Where the tool gate tells the model of a write that settled after it was told "outcome unknown"."""

from __future__ import annotations

from pipecat.frames.frames import LLMContextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.sim.scenario import ModelScript
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.tools.control import GenerationGuard

NOTICE = "Update on an earlier book_callback whose outcome was unknown: it went through."


def _notices(pending: list[str]):
    def take() -> list[str]:
        taken = list(pending)
        pending.clear()
        return taken

    return take


async def test_with_an_llm_downstream_the_notice_is_system_instruction_of_the_next_generation():
    llm = ScriptedLLMService(ModelScript.model_validate({"first_token_secs": 0, "token_secs": 0}),
                             system_instruction="Base prompt.")
    guard = GenerationGuard(notices=_notices([NOTICE]))
    context = LLMContext(messages=[{"role": "user", "content": "So did it work?"}])
    await run_test(Pipeline([guard, llm]), expected_down_frames=None, frames_to_send=[
        LLMContextFrame(context), SleepFrame(sleep=0.1), LLMContextFrame(context), SleepFrame(sleep=0.1)])
    assert [m["role"] for m in context.get_messages()] == ["user"], "nothing a provider would read as a caller turn"
    first, second = (call.messages[0] for call in llm.calls)
    assert first["role"] == "system" and NOTICE in first["content"] and first["content"].startswith("Base prompt.")
    assert second == {"role": "system", "content": "Base prompt."}, "told once, for the generation it concerns"


async def test_without_an_llm_downstream_the_notice_is_a_developer_message():
    guard = GenerationGuard(notices=_notices([NOTICE]))
    context = LLMContext(messages=[{"role": "user", "content": "So did it work?"}])
    await run_test(guard, frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame])
    assert context.get_messages()[-1] == {"role": "developer", "content": NOTICE}
