from pipecat.frames.frames import LLMContextFrame, TextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from pipecat_harness.checklist.directive import DEFAULT_MARKER
from pipecat_harness.checklist.director import ChecklistDirector
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.store import StateStore

BASE = f"You are Sam. Lines starting with {DEFAULT_MARKER} are your per-turn checklist instructions."


def _director(store: StateStore | None = None, **kwargs) -> ChecklistDirector:
    driver = ChecklistDriver(bundled_checklist(), store or MemoryStateStore(), **kwargs)
    return ChecklistDirector(driver, call_id="call-1")


def _directives(context: LLMContext) -> list[str]:
    return [
        m["content"]
        for m in context.get_messages()
        if m.get("role") == "system" and str(m.get("content", "")).startswith(DEFAULT_MARKER)
    ]


async def test_directive_is_the_last_system_block_and_old_ones_are_removed():
    director = _director()
    context = LLMContext(
        messages=[
            {"role": "system", "content": BASE},
            {"role": "user", "content": "Hi, this is Dana."},
            {"role": "assistant", "content": "Hi Dana! Were there any incidents? And any near misses?"},
            {"role": "system", "content": f"{DEFAULT_MARKER} Ask the next checklist question: stale"},
            {"role": "user", "content": "No incidents and no near misses."},
        ]
    )
    down, _ = await run_test(
        director, frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame]
    )
    messages = down[0].context.get_messages()
    assert messages[0] == {"role": "system", "content": BASE}  # mentions the marker mid-line: kept
    assert len(_directives(context)) == 1
    assert messages[-1]["role"] == "system"
    assert "Are there any scheduling conflicts coming up?" in messages[-1]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "system"]


async def test_mixed_system_message_keeps_its_other_lines():
    director = _director()
    context = LLMContext(
        messages=[
            {"role": "system", "content": f"Be brief.\n{DEFAULT_MARKER} old directive\nUse the caller's name."},
            {"role": "user", "content": "Hello."},
        ]
    )
    await run_test(director, frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame])
    messages = context.get_messages()
    assert messages[0]["content"] == "Be brief.\nUse the caller's name."
    assert len(_directives(context)) == 1


async def test_other_frames_pass_untouched():
    director = _director()
    down, _ = await run_test(director, frames_to_send=[TextFrame("hello")], expected_down_frames=[TextFrame])
    assert down[0].text == "hello"
    assert director.last_directive is None


async def test_store_failure_leaves_the_context_alone_and_the_frame_flows():
    class DownStore(MemoryStateStore):
        async def get_json(self, key):
            raise ConnectionError("redis down")

        async def acquire_and_read(self, *args, **kwargs):
            raise ConnectionError("redis down")

    decisions: list[str] = []
    director = _director(DownStore(), on_decision=lambda action, evidence: decisions.append(action))
    context = LLMContext(messages=[{"role": "system", "content": BASE}, {"role": "user", "content": "Hi."}])
    await run_test(director, frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame])
    assert context.get_messages() == [{"role": "system", "content": BASE}, {"role": "user", "content": "Hi."}]
    assert decisions == ["driver_error"]


async def test_walks_turn_by_turn_through_the_processor():
    director = _director()
    context = LLMContext(messages=[{"role": "system", "content": BASE}])
    said = []
    for utterance in ["Hi.", "No incidents and no near misses.", "No scheduling conflicts and no compliance updates."]:
        context.add_message({"role": "user", "content": utterance})
        await run_test(director, frames_to_send=[LLMContextFrame(context)], expected_down_frames=[LLMContextFrame])
        said.append(director.last_directive.wording)
        context.add_message({"role": "assistant", "content": director.last_directive.wording})
    assert said == [
        "Were there any safety incidents this week? And any near misses?",
        "Are there any scheduling conflicts coming up? And any compliance updates we should know about?",
        "Is any equipment out of service?",
    ]
    assert len(_directives(context)) == 1
