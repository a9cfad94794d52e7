"""The official ``openai`` client streaming against the proxy running on loopback."""

import json
from pathlib import Path

import openai
import pytest
import yaml

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.scripted import ScriptedReply, ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.upstream import SystemPrompt, UpstreamError, UpstreamRequest
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.redis_store import RedisStateStore

WALK = yaml.safe_load((Path(__file__).parents[1] / "checklist" / "data" / "site_check_in_walk.yaml").read_text())
VAPI = json.loads((Path(__file__).parent / "fixtures" / "vapi_chat_request.json").read_text())
TOOLS = VAPI["tools"]


async def _stream(client: openai.AsyncOpenAI, messages: list, call_id: str) -> tuple[str, list, str]:
    stream = await client.chat.completions.create(
        model="gpt-4o",
        messages=messages,
        stream=True,
        temperature=0.7,
        max_tokens=250,
        tools=TOOLS,
        extra_body={"call": {"id": call_id, "type": "webCall"}, "metadata": {"site": "test"}},
    )
    text, calls, finish = "", {}, None
    async for chunk in stream:  # the client parses every event; a malformed one would raise here
        assert chunk.object == "chat.completion.chunk"
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        for call in choice.delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            entry["id"] = call.id or entry["id"]
            entry["name"] = (call.function.name if call.function else None) or entry["name"]
            entry["arguments"] += call.function.arguments or "" if call.function else ""
        finish = choice.finish_reason or finish
    return text, [calls[i] for i in sorted(calls)], finish


async def _walk(serve, store_factory) -> list[str]:
    """A scripted Vapi-style conversation; returns what was asked, in order."""
    upstream = ScriptedUpstream()
    service = ProxyService(upstream, ChecklistDriver(bundled_checklist(), store_factory()))
    messages = [
        {"role": "system", "content": "You are Sam from Acme Builders."},
        {"role": "assistant", "content": "Hi, it's Sam with the weekly check-in."},
    ]
    spoken = []
    with serve(create_app(service)) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        for turn in WALK["turns"]:
            messages.append({"role": "user", "content": turn["say"]})
            text, calls, finish = await _stream(client, messages, "vapi-walk")
            assert finish == "stop" and not calls
            spoken.append(text)
            messages.append({"role": "assistant", "content": text})
        await client.close()
    # the scripted upstream says exactly the directive's wording: these are the questions the caller heard
    directives = [r.system.directive for r in upstream.requests]
    assert len(directives) == len(WALK["turns"])
    return spoken


def _assert_walk(spoken: list[str]) -> None:
    assert spoken[0] == "Were there any safety incidents this week? And any near misses?"
    assert spoken[2] == "Could you tell me a bit more about the incidents at the north yard?"
    assert spoken[6] == "You mentioned the client wants to visit on Friday. Could you tell me a bit more about that?"
    assert spoken[8].startswith("To sum up: reported incidents at the north yard, compliance updates")
    questions = [s for s in spoken if s.endswith("?")]
    assert len(questions) == len(set(questions)), "a question was asked twice"
    assert spoken[-3:] == [
        "Do you have any feedback about these check-in calls?",
        "Thanks for your time. Goodbye!",
        "Okay.",  # the checklist is done: no further question
    ]


async def test_openai_client_walks_the_checklist_through_the_proxy_memory(serve):
    spoken = await _walk(serve, MemoryStateStore)
    _assert_walk(spoken)


@pytest.mark.redis
async def test_openai_client_walks_the_checklist_through_the_proxy_redis(serve, redis_store: RedisStateStore):
    # the server thread gets its own client (a redis.asyncio pool belongs to one event loop)
    spoken = await _walk(serve, lambda: RedisStateStore(prefix=redis_store.prefix))
    _assert_walk(spoken)
    state = await ChecklistDriver(bundled_checklist(), redis_store).load("vapi-walk")
    assert state.asked == WALK["expected_asked"]
    assert state.all_closed(bundled_checklist())


async def test_openai_client_parses_tool_call_chunks(serve):
    upstream = ScriptedUpstream(
        [
            ScriptedReply(
                text="Transferring you now.",
                tool_calls=({"name": "transferCall", "arguments": {"destination": "+1555"}},),
            )
        ]
    )
    service = ProxyService(upstream, ChecklistDriver(bundled_checklist(), MemoryStateStore()))
    with serve(create_app(service)) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        text, calls, finish = await _stream(client, [{"role": "user", "content": "Get me a human."}], "vapi-tools")
        await client.close()
    assert text == "Transferring you now."
    assert finish == "tool_calls"
    assert calls[0]["name"] == "transferCall" and json.loads(calls[0]["arguments"]) == {"destination": "+1555"}


async def test_openai_client_sees_clear_http_errors(serve):
    service = ProxyService(ScriptedUpstream(), ChecklistDriver(bundled_checklist(), MemoryStateStore()))
    with serve(create_app(service)) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="missing call id"):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        await client.close()


async def test_openai_compatible_upstream_streams_from_a_real_endpoint(serve):
    """The proxy's OpenAI-compatible upstream, pointed at a second (pass-through) proxy on loopback."""
    inner = ProxyService(
        ScriptedUpstream(["Hello from upstream."]),
        policy=ModelPolicy(model="inner-policy-model", trust_platform_prompt=True),
    )
    with serve(create_app(inner)) as server:
        request = UpstreamRequest(
            system=SystemPrompt(base="Base prompt.", directive="[CHECKLIST DIRECTIVE] Ask X."),
            messages=[{"role": "user", "content": "hi"}],
            model="ignored",
        )
        bare = OpenAICompatibleUpstream(f"{server.url}/v1", model="upstream-model")
        with pytest.raises(UpstreamError, match="missing call id"):
            [c async for c in bare.stream(request)]
        await bare.aclose()
        upstream = OpenAICompatibleUpstream(
            f"{server.url}/v1", model="upstream-model", extra_body={"call": {"id": "inner"}}
        )
        chunks = [c async for c in upstream.stream(request)]
        await upstream.aclose()
    assert "".join(c.text for c in chunks) == "Hello from upstream."
    assert chunks[-1].finish_reason == "stop"
    seen = inner.upstream.requests[0]
    assert seen.model == "inner-policy-model"  # what the outer upstream asked for stops at the inner proxy
    # a directive arriving from outside is stripped by prefix; the stable base survives
    assert seen.system.base == "Base prompt."
    assert seen.messages == [{"role": "user", "content": "hi"}]
