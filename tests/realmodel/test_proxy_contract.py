"""The proxy against an OpenAI-compatible server nobody here wrote: llama-cpp-python serving SmolLM2-135M.

Each property is one a caller depends on: every turn is a real answer (never
the fallback because of a request shape the server refuses), a tool call
arrives whole, a cut stream is heard as the fallback and logged, and what the
fake accepts and refuses is what this server accepts and refuses.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from loguru import logger
from starlette.testclient import TestClient

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.fakes import ChatReply, OpenAIChatFake
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.service import DEFAULT_FALLBACK, ProxyService
from pipecat_harness.state.memory import MemoryStateStore
from tests.fakes.request_shapes import SHAPES, post_shape

VAPI = json.loads((Path(__file__).parents[1] / "proxy" / "fixtures" / "vapi_chat_request.json").read_text())
CALLER = ["No incidents and no near misses.", "One scheduling conflict on Friday.",
          "No compliance updates.", "That's everything, thanks."]
LOOKUP = {"type": "function", "function": {
    "name": "lookup_order", "description": "Look up an order by its number",
    "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}},
                   "required": ["order_number"]}}}


def _service(server, *, checklist: bool = True, **policy) -> ProxyService:
    driver = ChecklistDriver(bundled_checklist(), MemoryStateStore()) if checklist else None
    upstream = OpenAICompatibleUpstream(server.base_url, model=server.model)
    # Waits sized for a shared two-core machine: what is tested is what arrives, not how fast.
    return ProxyService(upstream, driver, policy=ModelPolicy(**{"max_tokens": 12, **policy}),
                        first_token_timeout_secs=60.0, chunk_timeout_secs=30.0)


def _events(body: str) -> list[dict]:
    lines = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def _spoken(events: list[dict]) -> str:
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events)


@pytest.fixture
def warnings():
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    yield lines
    logger.remove(sink)


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
async def test_the_server_accepts_and_refuses_what_the_fake_says_it_does(model_server, shape):
    status, events = await post_shape(model_server.base_url, shape.body)
    expected = shape.expected["llama-cpp-python"]
    assert status == expected.status
    if status == 200:
        assert bool(events) == expected.answered
    async with OpenAIChatFake(lambda request: ChatReply(text="Fine."), server="strict") as strict:
        strict_status, _ = await post_shape(strict.base_url, shape.body)
    if status != 200 or not events:  # the strict default refuses everything this server refuses
        assert strict_status == 400


async def test_every_turn_of_a_vapi_call_with_the_checklist_on_is_a_real_answer(model_server, warnings):
    service = _service(model_server)
    messages = [dict(m) for m in VAPI["messages"][:2]]
    heard = []
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy",
                                 timeout=60) as client:
        for line in CALLER:
            messages.append({"role": "user", "content": line})
            body = {**VAPI, "messages": messages, "call": {"id": "real-vapi-call"}}
            response = await client.post("/chat/completions", json=body)
            assert response.status_code == 200
            events = _events(response.text)
            finishes = [e["choices"][0]["finish_reason"] for e in events if e["choices"][0]["finish_reason"]]
            assert len(finishes) == 1 and finishes[0] in ("stop", "length")
            text = _spoken(events)
            heard.append(text)
            messages.append({"role": "assistant", "content": text})
    await service.upstream.aclose()
    assert all(text.strip() and DEFAULT_FALLBACK not in text for text in heard), heard
    assert not [line for line in warnings if "upstream" in line]


def test_every_retell_turn_is_a_real_answer(model_server):
    service = _service(model_server)
    transcript = [{"role": "agent", "content": VAPI["messages"][1]["content"]}]
    heard = []
    with TestClient(create_app(service)) as client, client.websocket_connect("/llm-websocket/real-retell") as ws:
        ws.receive_json()  # config
        for response_id, line in enumerate(CALLER[:3], start=1):
            transcript.append({"role": "user", "content": line})
            ws.send_text(json.dumps({"interaction_type": "response_required", "response_id": response_id,
                                     "transcript": transcript}))
            text = ""
            while True:
                frame = ws.receive_json()
                if frame.get("response_type") != "response" or frame["response_id"] == 0:
                    continue  # the opening (empty: no greeting configured)
                assert frame["response_id"] == response_id
                text += frame["content"]
                if frame["content_complete"]:
                    break
            heard.append(text)
            transcript.append({"role": "agent", "content": text})
        client.portal.call(service.upstream.aclose)
    assert all(text.strip() and DEFAULT_FALLBACK not in text for text in heard), heard


async def test_a_named_tool_call_arrives_whole_after_a_tool_history_without_content(model_server):
    service = _service(model_server, checklist=False, max_tokens=40, base_prompt="You look up orders.",
                       tools=(LOOKUP,), tool_choice={"type": "function", "function": {"name": "lookup_order"}})
    history = [{"role": "user", "content": "Hello."},
               {"role": "assistant", "tool_calls": [{"id": "c0", "type": "function",
                                                     "function": {"name": "lookup_order", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c0", "content": "no order number given"},
               {"role": "user", "content": "Where is my order 12345?"}]
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy",
                                 timeout=60) as client:
        response = await client.post("/chat/completions", json={"call": {"id": "tools"}, "messages": history})
    await service.upstream.aclose()
    events = _events(response.text)
    calls = [c for e in events for c in e["choices"][0]["delta"].get("tool_calls") or []]
    assert len(calls) == 1  # the server repeats id and name on every fragment; one call goes out, whole
    assert calls[0]["function"]["name"] == "lookup_order"
    arguments = json.loads(calls[0]["function"]["arguments"])  # one JSON object, from the server's fragments
    assert list(arguments) == ["order_number"] and isinstance(arguments["order_number"], str)
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_a_long_stream_is_relayed_word_for_word(model_server):
    body = {"model": model_server.model, "stream": True, "temperature": 0, "max_tokens": 32,
            "messages": [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "Describe a calm morning at the sea."}]}
    _, direct = await post_shape(model_server.base_url, body)
    service = _service(model_server, checklist=False, max_tokens=32, base_prompt="You are a helpful assistant.")
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy",
                                 timeout=60) as client:
        response = await client.post("/chat/completions", json={
            "call": {"id": "long"}, "messages": body["messages"][1:]})
    await service.upstream.aclose()
    assert _spoken(_events(response.text)) == _spoken(direct)
    assert len(_spoken(direct).split()) > 12


async def test_a_stream_the_server_cuts_is_heard_as_the_fallback_and_logged(model_server, warnings):
    # The server's default interrupt_requests: a second request ends the first stream with [DONE], no finish.
    service = _service(model_server, checklist=False, max_tokens=200)
    prepared = await service.prepare("cut", [{"role": "user", "content": "Tell me a long story."}])
    second = {"model": model_server.model, "stream": True, "max_tokens": 2,
              "messages": [{"role": "user", "content": "Hi"}]}
    chunks = aiter(service.stream(prepared.request, call_id="cut"))
    heard = [await anext(chunks)]  # the first words are out
    interrupting = asyncio.create_task(post_shape(model_server.base_url, second))
    heard += [chunk async for chunk in chunks]
    status, _ = await interrupting
    await service.upstream.aclose()
    assert status == 200
    text = "".join(chunk.text for chunk in heard)
    assert len(text) > len(DEFAULT_FALLBACK) and text.endswith(" " + DEFAULT_FALLBACK)
    assert [chunk.finish_reason for chunk in heard if chunk.finish_reason] == ["stop"]
    assert any("ended without a finish reason" in line and "cut" in line for line in warnings)


async def _fallback_turn(upstream: OpenAICompatibleUpstream) -> str:
    service = ProxyService(upstream, policy=ModelPolicy(max_tokens=8, base_prompt="Be brief."),
                           first_token_timeout_secs=60.0, chunk_timeout_secs=30.0)
    prepared = await service.prepare("refused", [{"role": "user", "content": "Hello?"}])
    chunks = [chunk async for chunk in service.stream(prepared.request, call_id="refused")]
    await upstream.aclose()
    assert [chunk.finish_reason for chunk in chunks if chunk.finish_reason] == ["stop"]
    return "".join(chunk.text for chunk in chunks)


async def test_a_request_the_server_refuses_is_heard_as_the_fallback_and_logged(model_server, warnings):
    # System blocks are what this server refuses (HTTP 500): the reason they are not the default.
    upstream = OpenAICompatibleUpstream(model_server.base_url, model=model_server.model, system_blocks=True)
    assert await _fallback_turn(upstream) == DEFAULT_FALLBACK
    assert any("HTTP 500" in line and "refused" in line for line in warnings)


async def test_the_servers_empty_200_is_heard_as_the_fallback_and_logged(model_server, warnings):
    # The server answers an assistant tool-call message without content with a 200 and no body at all.
    history = [{"role": "user", "content": "Hi"},
               {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                     "function": {"name": "lookup_order", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    upstream = OpenAICompatibleUpstream(model_server.base_url, model=model_server.model,
                                        extra_body={"messages": history})
    assert await _fallback_turn(upstream) == DEFAULT_FALLBACK
    assert any("ended without a finish reason" in line and "refused" in line for line in warnings)
