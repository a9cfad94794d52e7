"""A call's console page shows its verified handoff summary; every statement links to the record behind it."""

import asyncio
import contextlib
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.console import create_console_app
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario
from pipecat_harness.trace.handoff import build_handoff
from pipecat_harness.trace.timeline import Timeline
from tests.grader.grader_browser import chromium_page
from tests.grader.test_grader_console import TOKEN, _share

CALL = "business_callback_corrected_before_execution"
TARGET_GREEN = (0x66, 0xBB, 0x6A)  # a linked record's background when the link is followed (console.css)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    """The trace of a simulated call in which the caller corrected a booking before it ran."""
    directory = tmp_path_factory.mktemp("traces")
    result = run_scenario(load_scenario(Path(BUNDLED_DIR) / f"{CALL}.yaml"), controls=["call_state", "tool_gate"],
                          trace_dir=directory)
    assert result.as_expected, result.checks
    return directory


async def _graded(store: AuditStore, call_id: str = CALL) -> None:
    await store.write(AuditRow(
        tenant="acme", call_id=call_id, turn_id=1, utterance="Thursday at six, shall I book it?",
        caller_utterance="Book the callback for Thursday at six.", verdict="supported", category="none",
        claim="", constraint_ref=None, rationale="", confidence=1.0, grader_model="rules", constraints_version="v1",
        severity="info", created_at=time.time()))


@contextlib.asynccontextmanager
async def serve(store: AuditStore, traces: Path) -> AsyncIterator[str]:
    """The console with call traces, on a free loopback port."""
    app = create_console_app(store, TOKEN, traces=traces)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


def _client(store: AuditStore, traces: Path | None) -> httpx.AsyncClient:
    app = create_console_app(store, TOKEN, traces=traces)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console",
                             headers={"Authorization": f"Bearer {TOKEN}"})


async def test_every_handoff_line_links_to_a_record_listed_on_the_page(sqlite_store, traces):
    await _graded(sqlite_store)
    async with _client(sqlite_store, traces) as client:
        page = (await client.get(f"/t/acme/calls/{CALL}")).text
    section = page[page.index("<section id='handoff'>"):page.index("<section id='transcript'>")]
    lines = re.findall(r"<tr class='handoff-line' data-section='([^']+)'>(.*?)</tr>", section)
    expected = build_handoff(Timeline.load(traces / f"{CALL}.jsonl"))
    assert len(lines) == len(expected.lines) and {s for s, _ in lines} >= {"Requested", "Operation",
                                                                            "Caller correction"}
    record_ids = set(re.findall(r"<li class='record [a-z_]+' id='([^']+)'", section))
    for _, row in lines:
        hrefs = re.findall(r"href='#([^']+)'", row)
        assert hrefs, f"a statement without a link: {row}"
        assert set(hrefs) <= record_ids
    kinds = set(re.findall(r"class='handoff-link ([a-z_]+)'", section))
    assert kinds == {"caller_turn", "tool_result", "ledger_event"}
    assert "supersedes the earlier day=Thursday" in section and "Sorry, make it Friday." in section


async def test_without_traces_or_with_a_damaged_trace_the_page_still_renders(sqlite_store, tmp_path):
    await _graded(sqlite_store, "call-x")
    async with _client(sqlite_store, None) as client:
        page = await client.get("/t/acme/calls/call-x")
    assert page.status_code == 200 and "id='handoff'" not in page.text
    (tmp_path / "call-x.jsonl").write_text("{not json\n")
    async with _client(sqlite_store, tmp_path) as client:
        page = await client.get("/t/acme/calls/call-x")
    assert page.status_code == 200 and "could not be read" in page.text


@pytest.mark.chromium
async def test_following_a_handoff_link_lands_on_its_record_in_chromium(sqlite_store, traces, tmp_path):
    await _graded(sqlite_store)
    served = tmp_path / "served"
    shutil.copytree(traces, served)
    async with serve(sqlite_store, served) as base, chromium_page() as page:
        await page.goto(f"{base}/t/acme/calls/{CALL}?token={TOKEN}")
        await page.wait_for("document.styleSheets.length > 0 && !!document.querySelector('#handoff')")
        hrefs = await page.evaluate(
            "[...document.querySelectorAll('#handoff a.handoff-link')].map(a => a.getAttribute('href'))")
        assert hrefs
        missing = await page.evaluate(
            f"{hrefs!r}.filter(h => !document.querySelector(h))".replace("'", '"'))
        assert missing == []
        correction = await page.evaluate(
            "document.querySelector(\"tr[data-section='Caller correction'] a.handoff-link\").getAttribute('href')")
        await page.evaluate(
            "document.querySelector(\"tr[data-section='Caller correction'] a.handoff-link\").click()")
        await page.wait_for("location.hash.length > 1")
        assert await page.evaluate("location.hash") == correction
        landed = await page.screenshot(correction)
        assert _share(landed, TARGET_GREEN) > 0.5  # the record the link names is the one highlighted
        other = next((h for h in hrefs if h != correction), None)
        if other is not None:
            assert _share(await page.screenshot(other), TARGET_GREEN) < 0.05
        text = await page.evaluate(f"document.querySelector({correction!r}).innerText".replace("'", '"'))
        assert "Sorry, make it Friday." in text
