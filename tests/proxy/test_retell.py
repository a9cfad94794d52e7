import json
import threading
import time
from pathlib import Path

from starlette.testclient import TestClient

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.retell import transcript_to_messages
from pipecat_harness.proxy.scripted import ScriptedReply, ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.state.memory import MemoryStateStore

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _service(upstream: ScriptedUpstream) -> ProxyService:
    return ProxyService(upstream, ChecklistDriver(bundled_checklist(), MemoryStateStore()))


def _receive_response(ws, response_id: int) -> tuple[str, dict]:
    text = ""
    while True:
        frame = ws.receive_json()
        assert frame["response_type"] == "response"
        assert frame["response_id"] == response_id
        text += frame["content"]
        if frame["content_complete"]:
            return text, frame


def test_config_and_begin_message_then_response_frames():
    service = _service(ScriptedUpstream())
    with TestClient(create_app(service, retell_greeting="Hi, it's Sam.")) as client:
        with client.websocket_connect("/llm-websocket/retell-call-1") as ws:
            assert ws.receive_json() == {
                "response_type": "config",
                "config": {"auto_reconnect": True, "call_details": False},
            }
            assert ws.receive_json() == {
                "response_type": "response",
                "response_id": 0,
                "content": "Hi, it's Sam.",
                "content_complete": True,
            }
            ws.send_text(json.dumps(_fixture("retell_response_required.json")))
            text, final = _receive_response(ws, 1)
            assert text == (
                "Are there any scheduling conflicts coming up? And any compliance updates we should know about?"
            )
            assert final["end_call"] is False
            ws.send_text(json.dumps({"interaction_type": "ping_pong", "timestamp": 1764496800000}))
            assert ws.receive_json() == {"response_type": "ping_pong", "timestamp": 1764496800000}


def test_only_the_newest_response_id_is_answered():
    release = threading.Event()

    class SlowFirst(ScriptedUpstream):
        async def stream(self, request):
            if not self.requests:
                self.requests.append(request)
                import asyncio

                while not release.is_set():
                    await asyncio.sleep(0.01)
                yield  # pragma: no cover - superseded before it speaks
            async for chunk in super().stream(request):
                yield chunk

    service = _service(SlowFirst())
    with TestClient(create_app(service)) as client:
        with client.websocket_connect("/retell-call-2") as ws:
            ws.receive_json(), ws.receive_json()
            event = _fixture("retell_response_required.json")
            ws.send_text(json.dumps(event))
            deadline = time.monotonic() + 10
            while not service.upstream.requests and time.monotonic() < deadline:
                time.sleep(0.01)  # response 1 is at the upstream, still silent, when 2 supersedes it
            ws.send_text(json.dumps({**event, "response_id": 2}))
            ws.send_text(json.dumps({**event, "response_id": 1}))  # stale: ignored
            text, _ = _receive_response(ws, 2)
            release.set()
            ws.send_text(json.dumps({"interaction_type": "ping_pong", "timestamp": 1}))
            assert ws.receive_json() == {"response_type": "ping_pong", "timestamp": 1}
    assert text.startswith("Are there any scheduling conflicts")


def test_update_only_updates_state_without_a_reply_and_ignores_the_turn_in_progress():
    service = _service(ScriptedUpstream())
    with TestClient(create_app(service)) as client:
        with client.websocket_connect("/retell-call-3") as ws:
            ws.receive_json(), ws.receive_json()
            ws.send_text(json.dumps(_fixture("retell_update_only.json")))
            ws.send_text("this is not json")
            ws.send_text(json.dumps({"interaction_type": "call_details", "call": {}}))
            ws.send_text(json.dumps({"interaction_type": "ping_pong", "timestamp": 7}))
            assert ws.receive_json() == {"response_type": "ping_pong", "timestamp": 7}
    import asyncio

    state = asyncio.run(service.driver.load("retell-call-3"))
    assert state.analyzed_turns == 1  # "No scheduling" is still being spoken
    assert state.status("incidents").value == "denied"


def test_sign_off_step_ends_the_call_after_speaking():
    service = _service(ScriptedUpstream())
    answers = [
        "No incidents and no near misses.",
        "No scheduling conflicts and no compliance updates.",
        "No equipment out of service.",
        "Yes, correct.",
        "No feedback.",
    ]
    transcript: list[dict] = []
    spoken = []
    with TestClient(create_app(service)) as client:
        with client.websocket_connect("/retell-call-4") as ws:
            ws.receive_json(), ws.receive_json()
            for response_id, answer in enumerate(answers, start=1):
                transcript.append({"role": "user", "content": answer})
                event = {"interaction_type": "response_required", "response_id": response_id, "transcript": transcript}
                ws.send_text(json.dumps(event))
                text, final = _receive_response(ws, response_id)
                spoken.append((text, final["end_call"]))
                transcript.append({"role": "agent", "content": text})
    assert spoken[-3:] == [
        ("To sum up: nothing to report on any item. Is that right?", False),
        ("Do you have any feedback about these check-in calls?", False),
        ("Thanks for your time. Goodbye!", True),
    ]


def test_upstream_failure_still_completes_the_response():
    service = _service(ScriptedUpstream([ScriptedReply(text="a b c", fail_after_chunks=1)]))
    with TestClient(create_app(service)) as client:
        with client.websocket_connect("/retell-call-5") as ws:
            ws.receive_json(), ws.receive_json()
            ws.send_text(json.dumps(_fixture("retell_response_required.json")))
            text, final = _receive_response(ws, 1)
    assert text.startswith("a Sorry,") and final["content_complete"]


def test_transcript_conversion_skips_unknown_roles():
    assert transcript_to_messages([{"role": "agent", "content": "a"}, {"role": "x"}, "junk", {"role": "user"}]) == [
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": ""},
    ]
    assert transcript_to_messages(None) == []
