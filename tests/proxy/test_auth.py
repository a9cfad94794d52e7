"""Proxy credentials as Vapi and Retell send them, checked on every route before any state is touched."""

import copy
import json
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.auth import ProxyAuth, matches_any, retell_signature, vapi_hmac_signature
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.state.memory import MemoryStateStore

FIXTURES = Path(__file__).parent / "fixtures"
VAPI = json.loads((FIXTURES / "vapi_chat_request.json").read_text())
UPDATE = json.loads((FIXTURES / "vapi_conversation_update.json").read_text())
RETELL = json.loads((FIXTURES / "retell_response_required.json").read_text())
AUTH = ProxyAuth(secrets=("new-secret", "old-secret"), retell_api_keys=("retell-key",))


def _app() -> tuple[ProxyService, MemoryStateStore, ScriptedUpstream]:
    store = MemoryStateStore()
    upstream = ScriptedUpstream()
    return ProxyService(upstream, ChecklistDriver(bundled_checklist(), store)), store, upstream


def _client(service: ProxyService, auth: ProxyAuth = AUTH) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(service, auth=auth)), base_url="http://proxy"
    )


def test_matches_any_compares_every_secret():
    assert matches_any("b", ["a", "b"])
    assert not matches_any("c", ["a", "b"])
    assert not matches_any("", ["a"]) and not matches_any(None, ["a"]) and not matches_any("a", [])
    with pytest.raises(ValueError, match="non-empty"):
        ProxyAuth(secrets=("",))


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic bmV3LXNlY3JldA=="},
        {"X-Vapi-Secret": "wrong"},
        {"X-Vapi-Secret": "new-secret-but-longer"},
        {"Authorization": "Bearer "},
    ],
)
async def test_chat_completions_without_a_valid_credential_is_401_and_changes_nothing(headers):
    service, store, upstream = _app()
    async with _client(service) as client:
        response = await client.post("/v1/chat/completions", json=VAPI, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "authentication required"
    assert upstream.requests == [] and store.key_count == 0


@pytest.mark.parametrize(
    "headers",
    [{"Authorization": "Bearer new-secret"}, {"Authorization": "bearer old-secret"}, {"X-Vapi-Secret": "old-secret"}],
)
async def test_both_rotation_secrets_open_chat_completions(headers):
    service, _, upstream = _app()
    async with _client(service) as client:
        response = await client.post("/v1/chat/completions", json=VAPI, headers=headers)
    assert response.status_code == 200 and len(upstream.requests) == 1


async def test_vapi_webhook_accepts_the_server_secret_bearer_or_a_fresh_hmac_only():
    service, store, _ = _app()
    body = json.dumps(UPDATE).encode()
    now = str(int(time.time()))
    stale = str(int(time.time()) - 301)
    refused = [
        {},
        {"X-Vapi-Secret": "nope"},
        {"x-timestamp": now, "x-signature": vapi_hmac_signature("nope", now, body)},
        {"x-timestamp": stale, "x-signature": vapi_hmac_signature("new-secret", stale, body)},
        {"x-timestamp": now, "x-signature": vapi_hmac_signature("new-secret", now, body + b" ")},
    ]
    async with _client(service) as client:
        for headers in refused:
            response = await client.post("/webhook/vapi", content=body, headers=headers)
            assert response.status_code == 401, headers
        assert store.key_count == 0
        for headers in (
            {"X-Vapi-Secret": "old-secret"},
            {"Authorization": "Bearer new-secret"},
            {"x-timestamp": now, "x-signature": vapi_hmac_signature("old-secret", now, body)},
            {"x-timestamp": now + "000", "x-signature": "sha256=" + vapi_hmac_signature("new-secret", now + "000", body)},  # noqa: E501
        ):
            response = await client.post("/webhook/vapi", content=body, headers=headers)
            assert response.status_code == 200, headers
    assert store.key_count > 0
    call_id = UPDATE["message"]["call"]["id"]
    ended = json.dumps({"message": {"type": "end-of-call-report", "call": UPDATE["message"]["call"]}}).encode()
    async with _client(service) as client:
        assert (await client.post("/webhook/vapi", content=ended)).status_code == 401
        assert (await service.driver.load(call_id)).analyzed_turns == 1
        response = await client.post("/webhook/vapi", content=ended, headers={"X-Vapi-Secret": "new-secret"})
    assert response.json() == {"status": "forgotten"}
    assert (await service.driver.load(call_id)).analyzed_turns == 0


async def test_retell_webhook_needs_a_fresh_signature_over_the_exact_body_and_call_ended_frees_the_state():
    service, _, _ = _app()
    call_id = "retell-call-1"
    await service.observe(call_id, [{"role": "user", "content": "No incidents."}])
    assert await service.driver.store.get_json(service.driver._key(call_id)) is not None
    body = json.dumps({"event": "call_ended", "call": {"call_id": call_id}}).encode()
    now_ms = int(time.time() * 1000)
    async with _client(service) as client:
        for signature in (
            "",
            retell_signature("wrong-key", body, now_ms),
            retell_signature("retell-key", body + b"\n", now_ms),
            retell_signature("retell-key", body, now_ms - 301_000),
            "v=1,d=zz",
        ):
            response = await client.post("/webhook/retell", content=body, headers={"x-retell-signature": signature})
            assert response.status_code == 401
        assert await service.driver.store.get_json(service.driver._key(call_id)) is not None
        signed = {"x-retell-signature": retell_signature("retell-key", body, now_ms)}
        response = await client.post("/webhook/retell", content=body, headers=signed)
    assert response.status_code == 204
    assert await service.driver.store.get_json(service.driver._key(call_id)) is None


def test_retell_socket_opens_only_with_the_url_secret():
    service, store, upstream = _app()
    with TestClient(create_app(service, auth=AUTH)) as client:
        for path in ("/call-1", "/llm-websocket/call-1", "/llm-websocket/wrong/call-1"):
            with pytest.raises(WebSocketDenialResponse) as refused:
                with client.websocket_connect(path):
                    pass
            assert refused.value.status_code == 401
        assert store.key_count == 0 and upstream.requests == []
        for path in ("/llm-websocket/old-secret/call-1", "/llm-websocket/new-secret/call-1"):
            with client.websocket_connect(path) as ws:
                assert ws.receive_json()["response_type"] == "config"
        with client.websocket_connect("/llm-websocket/call-2", headers={"Authorization": "Bearer new-secret"}) as ws:
            assert ws.receive_json()["response_type"] == "config"


async def test_without_secrets_the_proxy_stays_open_for_loopback_development():
    service, _, upstream = _app()
    async with _client(service, ProxyAuth()) as client:
        assert (await client.post("/v1/chat/completions", json=copy.deepcopy(VAPI))).status_code == 200
    assert len(upstream.requests) == 1
