import copy
import json
from pathlib import Path

import httpx
import pytest

from pipecat_harness.checklist.directive import DEFAULT_MARKER
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.scripted import ScriptedReply, ScriptedUpstream
from pipecat_harness.proxy.service import DEFAULT_FALLBACK, ProxyService
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.store import StateStore

FIXTURES = Path(__file__).parent / "fixtures"
VAPI = json.loads((FIXTURES / "vapi_chat_request.json").read_text())
CALL_ID = VAPI["call"]["id"]


class CountingAnalyzer(RuleAnalyzer):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def analyze(self, checklist, state, utterance):
        self.calls.append(utterance)
        return await super().analyze(checklist, state, utterance)


def _service(upstream: ScriptedUpstream, store: StateStore | None = None, **kwargs) -> ProxyService:
    driver = ChecklistDriver(bundled_checklist(), store or MemoryStateStore(), **kwargs)
    return ProxyService(upstream, driver, first_token_timeout_secs=0.5, chunk_timeout_secs=0.2)


def _client(service: ProxyService, **kwargs) -> httpx.AsyncClient:
    app = create_app(service, **kwargs)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy")


def parse_sse(text: str) -> list:
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), events
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: ") :]) for e in events[:-1]]


def _spoken(chunks: list) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


async def test_streams_openai_chunks_with_a_two_block_system_prompt():
    upstream = ScriptedUpstream()
    async with _client(_service(upstream)) as client:
        response = await client.post("/v1/chat/completions", json=VAPI)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = parse_sse(response.text)
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert _spoken(chunks) == "Were there any safety incidents this week? And any near misses?"
    request = upstream.requests[0]
    # the operator's policy decides, whatever the platform asked for (gpt-4o, 0.7, 250 tokens, its tools, its prompt)
    assert (request.model, request.temperature, request.max_tokens, request.tools) == ("", 0.0, 400, [])
    assert request.system.base.startswith("You are Sam, calling a construction site manager")
    assert "Acme Builders" not in request.system.base
    assert "stale" not in request.system.base + request.system.directive
    assert request.system.directive.startswith(DEFAULT_MARKER)
    assert [m["role"] for m in request.messages] == ["assistant", "user"]


async def test_a_trusted_platform_prompt_joins_the_base_block():
    upstream = ScriptedUpstream()
    service = _service(upstream)
    service.policy = ModelPolicy(trust_platform_prompt=True)
    async with _client(service) as client:
        assert (await client.post("/v1/chat/completions", json=VAPI)).status_code == 200
    assert "You are Sam from Acme Builders. Keep answers short." in upstream.requests[0].system.base


async def test_tool_calls_stream_as_delta_tool_calls():
    upstream = ScriptedUpstream(
        [
            ScriptedReply(
                text="Let me transfer you.",
                tool_calls=({"name": "transferCall", "arguments": {"destination": "+15555550199"}},),
            )
        ]
    )
    async with _client(_service(upstream)) as client:
        response = await client.post("/chat/completions", json=VAPI)
    chunks = parse_sse(response.text)
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for call in chunk["choices"][0]["delta"].get("tool_calls", []):
            entry = calls.setdefault(call["index"], {"id": None, "name": None, "arguments": ""})
            entry["id"] = call.get("id") or entry["id"]
            entry["name"] = call["function"].get("name") or entry["name"]
            entry["arguments"] += call["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert calls[0]["name"] == "transferCall" and calls[0]["id"]
    assert json.loads(calls[0]["arguments"]) == {"destination": "+15555550199"}


async def test_model_rerun_after_a_tool_result_does_not_reanalyse_or_reask():
    analyzer = CountingAnalyzer()
    service = _service(ScriptedUpstream(), analyzer=analyzer)
    body = copy.deepcopy(VAPI)
    async with _client(service) as client:
        await client.post("/chat/completions", json=body)
        body["messages"] += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "endCall", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "ok"},
        ]
        await client.post("/chat/completions", json=body)
    state = await service.driver.load(CALL_ID)
    assert analyzer.calls == ["Sure, go ahead."]
    assert state.asked == ["ask:incidents", "ask:near_misses"]


async def test_non_streaming_request_gets_one_completion():
    async with _client(_service(ScriptedUpstream(["All good."]))) as client:
        response = await client.post("/chat/completions", json={**VAPI, "stream": False})
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "All good."}


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b"{not json", 400, "malformed_json"),
        (b"", 400, "empty_body"),
        (json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(), 400, "missing_call_id"),
        (json.dumps({**VAPI, "messages": [{"role": "narrator", "content": "x"}]}).encode(), 400, "unknown_role"),
    ],
)
async def test_bad_requests_get_clear_errors(content: bytes, status: int, code: str):
    upstream = ScriptedUpstream()
    async with _client(_service(upstream)) as client:
        response = await client.post("/chat/completions", content=content, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert upstream.requests == []


async def test_oversize_body_is_refused_declared_or_streamed():
    upstream = ScriptedUpstream()
    async with _client(_service(upstream), max_body_bytes=2000) as client:
        big = {**VAPI, "metadata": {"blob": "x" * 5000}}
        declared = await client.post("/chat/completions", json=big)

        async def chunked():
            data = json.dumps(big).encode()
            for i in range(0, len(data), 500):
                yield data[i : i + 500]

        streamed = await client.post("/chat/completions", content=chunked())
    assert declared.status_code == 413 and streamed.status_code == 413
    assert "2000-byte limit" in declared.json()["error"]["message"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    "reply",
    [
        ScriptedReply(text="Were there any incidents", fail_after_chunks=2),
        ScriptedReply(text="Hello there", fail_after_chunks=0),
    ],
)
async def test_upstream_failure_mid_stream_ends_with_a_fallback_sentence(reply: ScriptedReply, any_store: StateStore):
    service = _service(ScriptedUpstream([reply]), any_store)
    async with _client(service) as client:
        response = await client.post("/chat/completions", json=VAPI)
    chunks = parse_sse(response.text)
    assert _spoken(chunks).endswith(DEFAULT_FALLBACK)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    state = await service.driver.load(CALL_ID)
    assert state.analyzed_turns == 1 and state.asked == ["ask:incidents", "ask:near_misses"]


async def test_stalled_upstream_times_out_into_the_fallback():
    service = _service(ScriptedUpstream([ScriptedReply(text="one two three", fail_after_chunks=1, stall_secs=5)]))
    async with _client(service) as client:
        response = await client.post("/chat/completions", json=VAPI)
    chunks = parse_sse(response.text)
    assert _spoken(chunks) == "one " + DEFAULT_FALLBACK


async def test_state_store_outage_still_answers_without_a_directive():
    class DownStore(MemoryStateStore):
        async def offer_newest(self, key, stamp, *, ttl_secs=None):
            raise ConnectionError("redis down")

        async def acquire_and_read(self, *args, **kwargs):
            raise ConnectionError("redis down")

    upstream = ScriptedUpstream(["Sorry, go on."])
    async with _client(_service(upstream, DownStore())) as client:
        response = await client.post("/chat/completions", json=VAPI)
    assert _spoken(parse_sse(response.text)) == "Sorry, go on."
    assert upstream.requests[0].system.directive == ""


async def test_conversation_update_webhook_updates_the_state(any_store: StateStore):
    analyzer = CountingAnalyzer()
    service = _service(ScriptedUpstream(), any_store, analyzer=analyzer)
    update = json.loads((FIXTURES / "vapi_conversation_update.json").read_text())
    async with _client(service) as client:
        response = await client.post("/webhook/vapi", json=update)
        assert response.json() == {"status": "updated", "next": "pair"}
        ignored = await client.post("/webhook/vapi", json={"message": {"type": "status-update"}})
        assert ignored.json() == {"status": "ignored"}
        bad = await client.post("/webhook/vapi", content=b"nope")
        assert bad.status_code == 400
        # the chat channel meets the webhook channel in the store: the turn is not analysed again
        body = {**VAPI, "messages": update["message"]["conversation"]}
        chat = await client.post("/chat/completions", json=body)
    assert _spoken(parse_sse(chat.text)).startswith("Are there any scheduling conflicts coming up?")
    assert analyzer.calls == ["No incidents and no near misses."]


async def test_health():
    async with _client(_service(ScriptedUpstream())) as client:
        assert (await client.get("/health")).json() == {"status": "ok", "upstream": "scripted"}
