"""Numbers and histories an attacker controls stay bounded (in process, on loopback ASGI).

A row id past 2^63 is a 4xx, not a store overflow; a Retell frame with a huge
or impossible ``response_id`` does not silence the socket; the scripted
upstream's request history stops growing; a transcript snapshot with fewer
caller turns, arriving later, never supersedes one with more under a debounce.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.console import create_console_app
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.command import build_upstream
from pipecat_harness.proxy.retell import MAX_RESPONSE_ID
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.state.memory import MemoryStateStore

FIXTURES = Path(__file__).parents[1] / "proxy" / "fixtures"


async def test_a_row_id_past_2_63_is_a_client_error(tmp_path: Path):
    store = AuditStore(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}")
    await store.create_tables()
    row = await store.write(AuditRow(
        tenant="acme", call_id="c", turn_id=1, utterance="u", caller_utterance="", verdict="unsupported",
        category="price", claim="x", constraint_ref=None, rationale="r", confidence=1.0, grader_model="rules",
        constraints_version="v1", severity="critical"))
    app = create_console_app(store, "tok")
    auth = {"Authorization": "Bearer tok", "Accept": "application/json"}
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as client:
            for row_id in (2**63, 2**64 + 1, 10**40, -1, 0):
                response = await client.post(f"/rows/{row_id}/escalate", headers=auth, data={"note": "x"})
                assert 400 <= response.status_code < 500, (row_id, response.status_code)
            assert (await client.post(f"/rows/{2**63 - 1}/escalate", headers=auth)).status_code == 404
            assert (await client.post(f"/rows/{row.id}/escalate", headers=auth)).status_code == 200
    finally:
        await store.close()


def _answer(ws) -> tuple[int, str]:
    text = ""
    while True:
        frame = ws.receive_json()
        text += frame["content"]
        if frame["content_complete"]:
            return frame["response_id"], text


def test_a_huge_or_impossible_response_id_does_not_silence_the_retell_socket():
    service = ProxyService(ScriptedUpstream(), ChecklistDriver(bundled_checklist(), MemoryStateStore()))
    event = json.loads((FIXTURES / "retell_response_required.json").read_text())
    with TestClient(create_app(service)) as client, client.websocket_connect("/llm-websocket/call-x") as ws:
        ws.receive_json()
        ws.receive_json()  # config, then the begin message
        for impossible in (10**30, 2**63, -5, MAX_RESPONSE_ID + 1, 1.5):
            ws.send_text(json.dumps({**event, "response_id": impossible}))  # skipped
        ws.send_text(json.dumps({**event, "response_id": MAX_RESPONSE_ID}))  # possible, but not Retell's count
        assert _answer(ws)[0] == MAX_RESPONSE_ID
        for response_id in (1, 2, 3):  # Retell's own count goes on, and is answered
            ws.send_text(json.dumps({**event, "response_id": response_id}))
            assert _answer(ws)[0] == response_id
        ws.send_text(json.dumps({**event, "response_id": 10**6}))  # a jump no count makes: skipped
        ws.send_text(json.dumps({**event, "response_id": 2}))  # late: skipped
        ws.send_text(json.dumps({**event, "response_id": 4}))
        assert _answer(ws)[0] == 4


async def test_the_scripted_upstream_keeps_a_bounded_history():
    default = ScriptedUpstream(keep_requests=50)
    served = build_upstream("scripted")
    for upstream in (default, served):
        service = ProxyService(upstream, None)
        for index in range(300):
            prepared = await service.prepare(f"c{index}", [{"role": "user", "content": f"turn {index}"}])
            [chunk async for chunk in service.stream(prepared.request, call_id=f"c{index}")]
    assert len(default.requests) == 50 and "turn 299" in json.dumps(default.requests[-1].messages)
    assert served.requests == []


async def test_a_later_snapshot_with_fewer_turns_does_not_supersede_one_with_more():
    store = MemoryStateStore()
    driver = ChecklistDriver(bundled_checklist(), store, debounce_secs=0.2)
    service = ProxyService(ScriptedUpstream(), driver)
    longer = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Any safety incidents?"},
              {"role": "user", "content": "No incidents and no near misses."}]
    shorter = longer[:1]  # a stale snapshot, delivered late
    first = asyncio.create_task(service.observe("call-d", longer))
    await asyncio.sleep(0.05)
    await service.observe("call-d", shorter)
    await first
    state = await driver.load("call-d")
    assert state.analyzed_turns == 2  # both caller turns of the longer snapshot were analysed
