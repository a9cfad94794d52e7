import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn

from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.console import create_console_app
from tests.grader.grader_browser import chromium_page

TOKEN = "console-token"


async def add(store: AuditStore, turn: int, verdict: str, utterance: str, ref: str | None = "px_basic") -> AuditRow:
    return await store.write(AuditRow(
        tenant="sparkle", call_id="call-c", turn_id=turn, utterance=utterance, caller_utterance="How much?",
        verdict=verdict, category="price", claim=utterance, constraint_ref=ref,
        rationale=f"rationale of turn {turn}", confidence=0.9, grader_model="rules", constraints_version="v1",
        severity="critical" if verdict == "unsupported" else "info"))


@contextlib.asynccontextmanager
async def serve(store: AuditStore) -> AsyncIterator[str]:
    """Run the console on a free loopback port for the duration of the block."""
    server = uvicorn.Server(uvicorn.Config(create_console_app(store, TOKEN), host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def test_token_lists_flagged_newest_first_and_actions_persist(sqlite_store: AuditStore) -> None:
    await add(sqlite_store, 1, "supported", "The interior detail is $99.")
    first = await add(sqlite_store, 2, "unsupported", "The basic detail is $129.")
    second = await add(sqlite_store, 3, "llm_flagged", "We might be open late <b>tonight</b>.", ref=None)
    app = create_console_app(sqlite_store, TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console", follow_redirects=True) as client:
        assert (await client.get("/")).status_code == 401
        assert (await client.get("/?token=wrong")).status_code == 401
        assert (await client.get("/api/flagged")).status_code == 401
        page = await client.get(f"/?token={TOKEN}")
        assert page.status_code == 200
        html = page.text
        assert html.index(f'id="row-{second.id}"') < html.index(f'id="row-{first.id}"')
        assert "The interior detail" not in html
        assert "&lt;b&gt;tonight&lt;/b&gt;" in html  # utterances are escaped
        assert "rationale of turn 2" in html and "<code>px_basic</code>" in html
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
        for action, status in (("acknowledge", "acknowledged"), ("override", "overridden"),
                               ("escalate", "escalated")):
            response = await client.post(f"/rows/{first.id}/{action}", headers=headers, data={"note": action})
            assert response.json()["review_status"] == status
        assert (await client.post(f"/rows/{first.id}/delete", headers=headers)).status_code == 400
        assert (await client.post("/rows/999/escalate", headers=headers)).status_code == 404
        client.cookies.clear()
        assert (await client.post(f"/rows/{first.id}/escalate")).status_code == 401
    stored = await sqlite_store.get(first.id or 0)
    assert stored is not None and (stored.review_status, stored.review_note) == ("escalated", "escalate")


def test_the_console_needs_a_token(sqlite_store: AuditStore) -> None:
    with pytest.raises(ValueError, match="token"):
        create_console_app(sqlite_store, "")


@pytest.mark.chromium
async def test_one_click_actions_in_chromium(sqlite_store: AuditStore) -> None:
    first = await add(sqlite_store, 1, "unsupported", "The basic detail is $129.")
    second = await add(sqlite_store, 2, "unsupported", "The premium detail is $299.")
    async with serve(sqlite_store) as base, chromium_page() as page:
        await page.goto(f"{base}/")
        assert "401" in await page.evaluate("document.body.innerText")
        await page.goto(f"{base}/?token={TOKEN}")
        ids = await page.evaluate("[...document.querySelectorAll('article.card')].map(c => +c.dataset.rowId)")
        assert ids == [second.id, first.id]
        await page.evaluate(f"document.querySelector('#row-{first.id} .action-escalate').click()")
        await page.wait_for(f"document.querySelector('#row-{first.id}')?.dataset.status === 'escalated'")
        await page.evaluate(f"document.querySelector('#row-{second.id} .action-acknowledge').click()")
        await page.wait_for(f"document.querySelector('#row-{second.id}')?.dataset.status === 'acknowledged'")
    assert [(r.id, r.review_status) for r in await sqlite_store.flagged()] == [
        (second.id, "acknowledged"), (first.id, "escalated")]
