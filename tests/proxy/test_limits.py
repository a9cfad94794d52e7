"""Bounds and malformed input: every refusal is a 4xx naming the limit, the Retell socket survives bad frames."""

import json
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.limits import ProxyLimits
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.state.memory import MemoryStateStore

FIXTURES = Path(__file__).parent / "fixtures"
VAPI = json.loads((FIXTURES / "vapi_chat_request.json").read_text())
RETELL = json.loads((FIXTURES / "retell_response_required.json").read_text())
LIMITS = ProxyLimits(
    max_body_bytes=50_000, max_messages=20, max_total_chars=2_000, max_call_id_chars=40, max_json_containers=200
)


def _service(upstream: ScriptedUpstream | None = None) -> tuple[ProxyService, MemoryStateStore]:
    store = MemoryStateStore()
    return ProxyService(upstream or ScriptedUpstream(), ChecklistDriver(bundled_checklist(), store)), store


def _body(**changes) -> dict:
    body = json.loads(json.dumps(VAPI))
    body.update(changes)
    return body


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        (_body(messages=[{"role": "user", "content": "hi"}] * 21), 413, "proxy.max_messages"),
        (_body(messages=[{"role": "user", "content": "x" * 2_001}]), 413, "proxy.max_total_chars"),
        (_body(messages=[{"role": "user", "content": [{"type": "text", "text": "x" * 2_001}]}]), 413, "total_chars"),
        (_body(call={"id": "c" * 41}), 400, "proxy.max_call_id_chars"),
        (_body(metadata={"x": [[]] * 201}), 413, "proxy.max_json_containers"),
        (_body(call={"id": "../../etc/passwd"}), 400, "call id may contain only"),
        (_body(call={"id": "a b"}), 400, "call id may contain only"),
    ],
)
async def test_requests_beyond_the_limits_are_refused_naming_the_limit(body, status, names):
    service, store = _service()
    app = create_app(service, limits=LIMITS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == status
    assert names in response.json()["error"]["message"]
    assert store.key_count == 0 and service.upstream.requests == []


@pytest.mark.parametrize("route", ["/chat/completions", "/webhook/vapi"])
@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (_nested(100_000), "too_many_containers"),
        (_nested(10_000), "too_deep"),
        ('{"message": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}", "too_deep"),
        ('{"messages": [{"role": "user", "content": "\\ud800"}], "call": {"id": "c"}}', "invalid_unicode"),
        (b'{"messages": "\xff\xfe"}', "malformed_json"),
        ("", "empty_body"),
    ],
)
async def test_malformed_json_is_a_400_never_a_500(route, raw, code):
    service, store = _service()
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        response = await client.post(route, content=raw, headers={"content-type": "application/json"})
    assert response.status_code == (413 if code == "too_many_containers" else 400), response.text
    assert response.json()["error"]["code"] == code
    assert store.key_count == 0


async def test_a_paired_surrogate_escape_is_ordinary_text():
    service, _ = _service()
    body = json.dumps(_body(messages=[{"role": "user", "content": "I'm fine \ud83d\ude00"}]))  # ensure_ascii escapes
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        response = await client.post("/chat/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert service.upstream.requests[0].messages[-1]["content"] == "I'm fine \U0001f600"


async def test_a_lone_surrogate_from_the_model_does_not_break_the_stream():
    service, _ = _service(ScriptedUpstream(["Okay \udc80 then"]))
    app = create_app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        response = await client.post("/chat/completions", json=VAPI)
    assert response.status_code == 200
    events = [e for e in response.text.split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    spoken = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert spoken == "Okay \udc80 then"  # sent as a JSON escape, decoded back by the client


def test_retell_socket_skips_binary_nested_huge_and_oversized_frames_and_keeps_the_call():
    service, _ = _service(ScriptedUpstream(["Thanks for that."]))
    limits = ProxyLimits(max_body_bytes=20_000, max_messages=50)
    too_many = {**RETELL, "transcript": [{"role": "user", "content": "hi"}] * 51}
    with TestClient(create_app(service, limits=limits)) as client:
        with client.websocket_connect("/llm-websocket/retell-call-1") as ws:
            assert ws.receive_json()["response_type"] == "config"
            assert ws.receive_json()["response_id"] == 0
            ws.send_bytes(b"\x00\x01binary")
            ws.send_text(_nested(100_000))
            ws.send_text('{"interaction_type": ' + '{"a": ' * 80 + "1" + "}" * 80 + "}")
            ws.send_text("x" * 20_001)
            ws.send_text("not json")
            ws.send_text("[1, 2]")
            ws.send_text(json.dumps(too_many))
            ws.send_text(json.dumps({"interaction_type": "response_required", "response_id": True}))
            ws.send_text(json.dumps(RETELL))
            text = ""
            while True:
                frame = ws.receive_json()
                assert frame["response_id"] == 1
                text += frame["content"]
                if frame["content_complete"]:
                    break
    assert text == "Thanks for that."
    assert len(service.upstream.requests) == 1


def test_retell_socket_refuses_a_malformed_call_id_before_opening():
    from starlette.testclient import WebSocketDenialResponse

    service, store = _service()
    with TestClient(create_app(service)) as client:
        with pytest.raises(WebSocketDenialResponse) as refused:
            with client.websocket_connect("/llm-websocket/" + "c" * 200):
                pass
    assert refused.value.status_code == 400
    assert store.key_count == 0
