import argparse
import json
from types import SimpleNamespace

import pytest
from google.genai import types

from pipecat_harness.config import HarnessConfig
from pipecat_harness.proxy.command import add_parser, build_service, build_upstream
from pipecat_harness.proxy.gemini_upstream import GeminiUpstream, to_gemini_contents
from pipecat_harness.proxy.openai_upstream import render_openai_messages
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.upstream import SystemPrompt, UpstreamError, UpstreamRequest

REQUEST = UpstreamRequest(
    system=SystemPrompt(base="Stable base.", directive="[CHECKLIST DIRECTIVE] Ask about incidents."),
    messages=[
        {"role": "user", "content": "Transfer me please."},
        {
            "role": "assistant",
            "content": "Sure.",
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "found"},
    ],
    tools=[{"type": "function", "function": {"name": "transferCall", "parameters": {"type": "object"}}}],
    max_tokens=100,
)


def test_the_system_prompt_goes_upstream_as_one_string_unless_blocks_are_asked_for():
    # Several OpenAI-compatible servers (llama-cpp-python's among them) refuse a system message made of parts.
    messages = render_openai_messages(REQUEST)
    assert messages[0] == {
        "role": "system", "content": "Stable base.\n\n[CHECKLIST DIRECTIVE] Ask about incidents."
    }
    assert messages[1:] == REQUEST.messages
    cached = render_openai_messages(REQUEST, mark_cacheable=True)
    assert cached[0]["content"] == [
        {"type": "text", "text": "Stable base.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "[CHECKLIST DIRECTIVE] Ask about incidents."},
    ]
    blocks = render_openai_messages(REQUEST, system_blocks=True)
    assert [b["text"] for b in blocks[0]["content"]] == ["Stable base.", "[CHECKLIST DIRECTIVE] Ask about incidents."]
    assert "cache_control" not in blocks[0]["content"][0]


def test_an_assistant_tool_call_without_content_goes_upstream_with_an_empty_string():
    request = UpstreamRequest(system=SystemPrompt(base=""), messages=[
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": None, "tool_calls": REQUEST.messages[1]["tool_calls"]},
        {"role": "assistant", "tool_calls": REQUEST.messages[1]["tool_calls"]},
    ])
    messages = render_openai_messages(request)
    assert [m.get("content") for m in messages] == ["Look it up.", "", ""]
    assert request.messages[1]["content"] is None  # the platform's history is not changed


def test_gemini_contents_conversion():
    contents = to_gemini_contents(REQUEST.messages)
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert contents[1].parts[1].function_call.name == "lookup"
    assert contents[1].parts[1].function_call.args == {"q": 1}
    assert contents[2].parts[0].function_response.name == "lookup"
    assert contents[2].parts[0].function_response.response == {"result": "found"}


class FakeStreamModels:
    def __init__(self, responses=None, error: Exception | None = None) -> None:
        self.responses = responses or []
        self.error = error
        self.calls: list[dict] = []

    async def generate_content_stream(self, *, model, contents, config):
        self.calls.append({"model": model, "contents": contents, "config": config})
        if self.error:
            raise self.error

        async def gen():
            for response in self.responses:
                yield response

        return gen()


def _response(*parts: types.Part, finish: str | None = None) -> types.GenerateContentResponse:
    candidate = types.Candidate(content=types.Content(role="model", parts=list(parts)), finish_reason=finish)
    return types.GenerateContentResponse(candidates=[candidate])


async def test_gemini_upstream_streams_text_and_function_calls():
    models = FakeStreamModels(
        [
            _response(types.Part(text="Let me ")),
            _response(types.Part(text="transfer you.")),
            _response(
                types.Part(function_call=types.FunctionCall(name="transferCall", args={"to": "x"})), finish="STOP"
            ),
        ]
    )
    upstream = GeminiUpstream(SimpleNamespace(aio=SimpleNamespace(models=models)), model="gemini-test")
    chunks = [c async for c in upstream.stream(REQUEST)]
    assert "".join(c.text for c in chunks) == "Let me transfer you."
    call = next(c.tool_calls[0] for c in chunks if c.tool_calls)
    assert (call.index, call.name, json.loads(call.arguments)) == (0, "transferCall", {"to": "x"})
    assert chunks[-1].finish_reason == "tool_calls"
    config = models.calls[0]["config"]
    assert [p.text for p in config.system_instruction.parts] == [
        "Stable base.",
        "[CHECKLIST DIRECTIVE] Ask about incidents.",
    ]
    assert config.temperature == 0.0 and config.max_output_tokens == 100
    assert config.tools[0].function_declarations[0].name == "transferCall"


async def test_gemini_upstream_errors_become_upstream_errors():
    models = FakeStreamModels(error=RuntimeError("quota"))
    upstream = GeminiUpstream(SimpleNamespace(aio=SimpleNamespace(models=models)))
    with pytest.raises(UpstreamError, match="quota"):
        [c async for c in upstream.stream(REQUEST)]


def test_command_parser_and_builders():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["proxy", "--upstream", "openai", "--upstream-url", "http://127.0.0.1:9/v1", "--port", "9000"]
    )
    assert (args.upstream, args.port, args.max_body_bytes) == ("openai", 9000, None)
    with pytest.raises(ValueError, match="--upstream-url"):
        build_upstream("openai")
    with pytest.raises(ValueError, match="unknown upstream"):
        build_upstream("nope")
    service = build_service(HarnessConfig(), build_upstream("scripted"))
    assert isinstance(service.upstream, ScriptedUpstream)
    assert service.driver is not None and service.driver.checklist.name == "site_check_in"
    assert build_service(HarnessConfig(), ScriptedUpstream(), with_checklist=False).driver is None
