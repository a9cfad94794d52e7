"""The directive reaches each provider as instruction, on every model run of the turn.

Each test runs the director with a real Pipecat LLM service downstream, applies
the settings frame the director queued exactly as the service does, and reads
the request the service's own adapter builds: Gemini's ``system_instruction``,
Anthropic's ``system``, OpenAI's leading system message. The model run after a
tool result (an ``LLMContextFrame`` that never passes the director) is built
from the same settings and must carry the directive too.
"""

from typing import Any

import pytest
from pipecat.frames.frames import LLMContextFrame, LLMUpdateSettingsFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from pipecat_harness.checklist.directive import DEFAULT_MARKER
from pipecat_harness.checklist.director import ChecklistDirector, compose_instruction
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.state.memory import MemoryStateStore

BASE = "You are Sam, the site check-in agent."


def _gemini() -> Any:
    from pipecat.services.google.llm import GoogleLLMService

    return GoogleLLMService(api_key="offline", settings=GoogleLLMService.Settings(system_instruction=BASE))


def _openai() -> Any:
    from pipecat.services.openai.llm import OpenAILLMService

    return OpenAILLMService(api_key="offline", settings=OpenAILLMService.Settings(system_instruction=BASE))


def _anthropic() -> Any:
    pytest.importorskip("anthropic", reason="the anthropic SDK is not installed")
    from pipecat.services.anthropic.llm import AnthropicLLMService

    return AnthropicLLMService(api_key="offline", settings=AnthropicLLMService.Settings(system_instruction=BASE))


async def _direct(llm: Any, context: LLMContext) -> ChecklistDirector:
    director = ChecklistDirector(ChecklistDriver(bundled_checklist(), MemoryStateStore()), call_id="call-1")
    director.llm = llm
    down, _ = await run_test(director, frames_to_send=[LLMContextFrame(context)],
                             expected_down_frames=[LLMUpdateSettingsFrame, LLMContextFrame])
    assert down[0].service is llm
    await llm._update_settings(down[0].delta)  # what LLMService.process_frame does with the frame
    return director


async def _request(llm: Any, context: LLMContext) -> tuple[str, list[dict[str, Any]]]:
    """(instruction text, conversation messages as role/text) of the request the service would send."""
    adapter = llm.get_llm_adapter()
    instruction = llm.settings.system_instruction
    name = type(llm).__name__
    if name == "GoogleLLMService":
        params = await adapter.get_llm_invocation_params(context, system_instruction=instruction)
        turns = [{"role": c.role, "text": " ".join(p.text or "" for p in c.parts)} for c in params["messages"]]
        return params["system_instruction"] or "", turns
    if name == "AnthropicLLMService":
        params = await llm._get_llm_invocation_params(context)
        system = params["system"]
        text = system if isinstance(system, str) else " ".join(block["text"] for block in system)
        turns = []
        for message in params["messages"]:
            content = message["content"]
            parts = [content] if isinstance(content, str) else [c.get("text", "") for c in content]
            turns.append({"role": message["role"], "text": " ".join(parts)})
        return text, turns
    params = await adapter.get_llm_invocation_params(context, system_instruction=instruction,
                                                     convert_developer_to_user=not llm.supports_developer_role)
    messages = [{"role": m["role"], "text": str(m.get("content") or "")} for m in params["messages"]]
    leading = [m["text"] for m in messages[:1] if m["role"] == "system"]
    return (leading[0] if leading else ""), messages[len(leading):]


def _tool_round(context: LLMContext) -> None:
    context.add_message({"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "log_note", "arguments": "{}"}}]})
    context.add_message({"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'})


@pytest.mark.parametrize("make", [_gemini, _openai, _anthropic], ids=["gemini", "openai", "anthropic"])
async def test_directive_is_system_instruction_on_every_run_of_the_turn(make):
    llm = make()
    context = LLMContext(messages=[{"role": "user", "content": "Hi, this is Dana."}])
    director = await _direct(llm, context)
    wording = director.last_directive.wording
    for run in ("first run", "after a tool result"):
        instruction, turns = await _request(llm, context)
        assert instruction.startswith(BASE), run
        assert wording in instruction and DEFAULT_MARKER in instruction, run
        assert not any(DEFAULT_MARKER in t["text"] for t in turns), (run, turns)
        assert turns[0]["role"] == "user" and "Dana" in turns[0]["text"]
        _tool_round(context)


@pytest.mark.parametrize("make", [_gemini, _openai, _anthropic], ids=["gemini", "openai", "anthropic"])
async def test_next_turn_replaces_the_directive_and_keeps_the_base(make):
    llm = make()
    context = LLMContext(messages=[{"role": "user", "content": "Hi, this is Dana."}])
    first = (await _direct(llm, context)).last_directive
    context.add_message({"role": "assistant", "content": first.wording})
    context.add_message({"role": "user", "content": "No incidents and no near misses."})
    second = (await _direct(llm, context)).last_directive
    instruction, _ = await _request(llm, context)
    assert second.wording != first.wording
    assert second.wording in instruction and first.wording not in instruction
    assert instruction.count(BASE) == 1 and instruction.count("Ask nothing else") == 1


def test_compose_instruction_replaces_old_directive_lines():
    old = compose_instruction(BASE, f"{DEFAULT_MARKER} old", DEFAULT_MARKER)
    assert compose_instruction(old, f"{DEFAULT_MARKER} new", DEFAULT_MARKER) == f"{BASE}\n\n{DEFAULT_MARKER} new"
    assert compose_instruction(None, f"{DEFAULT_MARKER} new", DEFAULT_MARKER) == f"{DEFAULT_MARKER} new"
