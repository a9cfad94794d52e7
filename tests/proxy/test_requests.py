import json
from pathlib import Path

import pytest

from pipecat_harness.proxy.requests import (
    RequestError,
    parse_chat_request,
    parse_conversation_update,
    parse_json_body,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_vapi_chat_request_fixture_parses():
    turn = parse_chat_request(_fixture("vapi_chat_request.json"))
    assert turn.call_id == "3f6e1c9a-4b7d-4f21-9a0e-vapi-fixture"
    assert (turn.model, turn.max_tokens, turn.temperature, turn.stream) == ("gpt-4o", 250, 0.7, True)
    assert [t["function"]["name"] for t in turn.tools] == ["transferCall", "endCall"]
    assert turn.metadata == {"site": "north yard", "crm_id": "C-991"}


@pytest.mark.parametrize(
    ("body", "call_id"),
    [
        ({"messages": [{"role": "user", "content": "hi"}], "call": {"callId": "old-style"}}, "old-style"),
        ({"messages": [{"role": "user", "content": "hi"}], "metadata": {"call_id": "from-meta"}}, "from-meta"),
        ({"messages": [{"role": "user", "content": "hi"}], "call_id": "destructured"}, "destructured"),
    ],
)
def test_call_id_sources(body: dict, call_id: str):
    assert parse_chat_request(body).call_id == call_id


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "missing_call_id", "missing call id"),
        ({"messages": [], "call": {"id": "c"}}, "invalid_messages", "non-empty list"),
        ({"call": {"id": "c"}}, "invalid_messages", "messages must be"),
        (
            {"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}], "call": {"id": "c"}},
            "unknown_role",
            "messages[1].role 'robot'",
        ),
        ({"messages": [{"role": "user", "content": 5}], "call": {"id": "c"}}, "invalid_messages", "content"),
        ({"messages": [{"role": "user"}], "call": {"id": "c"}, "max_tokens": -1}, "invalid_max_tokens", "positive"),
        ({"messages": [{"role": "user"}], "call": {"id": "c"}, "tools": {"a": 1}}, "invalid_tools", "tools"),
        ([1, 2], "invalid_body", "JSON object"),
    ],
)
def test_bad_requests_name_the_problem(body, code: str, fragment: str):
    with pytest.raises(RequestError) as info:
        parse_chat_request(body)
    assert info.value.status == 400
    assert info.value.code == code
    assert fragment in info.value.message


@pytest.mark.parametrize("raw", [b"", b"   ", b"{not json", b"\xff\xfe"])
def test_malformed_bodies(raw: bytes):
    with pytest.raises(RequestError) as info:
        parse_json_body(raw)
    assert info.value.status == 400


def test_conversation_update_fixture_and_other_events():
    update = parse_conversation_update(_fixture("vapi_conversation_update.json"))
    assert update.call_id == "3f6e1c9a-4b7d-4f21-9a0e-vapi-fixture"
    assert [m["role"] for m in update.messages] == ["system", "assistant", "user"]
    vapi_style = _fixture("vapi_conversation_update.json")
    del vapi_style["message"]["conversation"]
    assert parse_conversation_update(vapi_style).messages[-1] == {
        "role": "user",
        "content": "No incidents and no near misses.",
    }
    assert parse_conversation_update({"message": {"type": "status-update", "status": "ended"}}) is None
    with pytest.raises(RequestError, match=r"without call\.id"):
        parse_conversation_update({"message": {"type": "conversation-update", "conversation": []}})
    with pytest.raises(RequestError, match="'message' object"):
        parse_conversation_update({"type": "conversation-update"})
