"""Cross-site request forgery against the console, from a page on another port of the same host.

That page is the same *site* as the console (ports do not count), so the
browser sends the ``SameSite=Strict`` session cookie with its requests: the
console itself must refuse them. In headless Chromium the attacker's page
auto-submits a review form and sends ``no-cors`` credentialed fetches (a
review, a logout); every row and the operator's session stay as they were,
while the console's own form still works. In process, each check on its own:
origin, body type, CSRF token, logout, and sessions capped per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from aiohttp import web

from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.console import ConsoleAccess, create_console_app
from tests.grader.grader_browser import chromium_page

TOKEN, ACME, GLOBEX = "csrf-admin-token", "csrf-acme-token", "csrf-globex-token"
CREDENTIALS = (TOKEN, ACME, GLOBEX)


def _row(tenant: str, turn: int) -> AuditRow:
    return AuditRow(
        tenant=tenant, call_id=f"{tenant}-call", turn_id=turn, utterance=f"{tenant} turn {turn} says $129",
        caller_utterance="?", verdict="unsupported", category="price", claim="$129", constraint_ref="px",
        rationale="not listed", confidence=0.9, grader_model="rules", constraints_version="v1", severity="critical",
        created_at=time.time() - turn,
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AuditStore]:
    audit = AuditStore(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}")
    await audit.create_tables()
    try:
        yield audit
    finally:
        await audit.close()


@contextlib.asynccontextmanager
async def _console(store: AuditStore) -> AsyncIterator[str]:
    app = create_console_app(store, TOKEN)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def _attacker(html: str) -> AsyncIterator[str]:
    """A page on another port of the same host."""
    app = web.Application()
    app.router.add_get("/", lambda _: web.Response(text=html, content_type="text/html"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/"
    finally:
        await runner.cleanup()


def _attack_page(console: str, form_row: int, fetch_row: int) -> str:
    return f"""<!doctype html><html><body>
<form id="forged" method="post" action="{console}/rows/{form_row}/override">
  <input name="note" value="forged override"><input name="who" value="attacker"><input name="next" value="/">
</form>
<script>
const options = {{method: "POST", mode: "no-cors", credentials: "include"}};
fetch("{console}/rows/{fetch_row}/acknowledge", {{...options,
      headers: {{"Content-Type": "application/x-www-form-urlencoded"}}, body: "note=forged+ack&who=attacker"}})
  .then(() => fetch("{console}/rows/{fetch_row}/escalate", {{...options, headers: {{"Content-Type": "text/plain"}},
                    body: "note=forged"}}))
  .then(() => fetch("{console}/logout", {{...options}}))
  .then(() => {{ document.title = "fetched"; document.getElementById("forged").submit(); }},
        () => {{ document.title = "fetched"; document.getElementById("forged").submit(); }});
</script></body></html>"""


async def _landed(page, origin: str) -> str:
    """The text of the page the tab ends on at ``origin`` (the attacker's page navigates it there itself)."""
    async with asyncio.timeout(15):
        while True:
            with contextlib.suppress(RuntimeError):  # a navigation under way destroys the page's context
                if await page.evaluate(f"location.href.startsWith({origin!r}) && document.readyState === 'complete'"):
                    return await page.evaluate("document.body.innerText")
            await asyncio.sleep(0.05)


@pytest.mark.chromium
async def test_a_same_site_page_on_another_port_changes_nothing_and_logs_no_one_out(store: AuditStore):
    rows = [await store.write(_row("acme", turn)) for turn in (1, 2, 3)]
    forged_form, forged_fetch, own = rows
    async with _console(store) as console, chromium_page() as page:
        await page.goto(f"{console}/?token={TOKEN}")
        assert await page.evaluate("document.querySelectorAll('article.card').length") == 3
        async with _attacker(_attack_page(console, forged_form.id or 0, forged_fetch.id or 0)) as attacker:
            assert attacker.split(":")[1] == console.split(":")[1] and attacker != console + "/"  # same host
            await page.call("Page.navigate", url=attacker)
            refusal = await _landed(page, console)
        assert "cross-origin request refused" in refusal
        for row in (forged_form, forged_fetch):
            stored = await store.get(row.id or 0)
            assert stored is not None and stored.review_status == "open" and stored.review_note == ""
            assert (await store.history([row.id or 0])).get(row.id or 0, []) == []
        # still logged in, and the console's own form (with its token) works
        await page.goto(f"{console}/")
        assert await page.evaluate("document.querySelectorAll('article.card').length") == 3
        await page.evaluate(f"""(() => {{ const box = document.querySelector('#row-{own.id}');
            box.querySelector('.note').value = 'checked'; box.querySelector('.action-escalate').click(); }})()""")
        await page.wait_for(f"document.querySelector('#row-{own.id}')?.dataset.status === 'escalated'")
    stored = await store.get(own.id or 0)
    assert stored is not None and stored.review_status == "escalated" and stored.review_note == "checked"


async def _session(client: httpx.AsyncClient, token: str = TOKEN) -> str:
    """Log in with ``token`` and return the page's CSRF token."""
    page = await client.get(f"/?token={token}", follow_redirects=True)
    found = re.search(r"name='csrf_token' value='([0-9a-f]+)'", page.text)
    assert found, "every console form carries the session's CSRF token"
    return found.group(1)


async def test_unsafe_requests_need_the_console_origin_a_form_body_and_the_session_token(store: AuditStore):
    row = await store.write(_row("acme", 1))
    app = create_console_app(store, TOKEN)
    base = "http://console.test"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as client:
        csrf = await _session(client)
        path = f"/rows/{row.id}/override"
        tampered = csrf[:-1] + ("1" if csrf.endswith("0") else "0")  # always differs from the real token
        refused = [
            ({"Origin": "http://console.test:8081"}, {"note": "x", "csrf_token": csrf}, 403),
            ({"Origin": "null"}, {"note": "x", "csrf_token": csrf}, 403),
            ({"Sec-Fetch-Site": "same-site"}, {"note": "x", "csrf_token": csrf}, 403),
            ({"Sec-Fetch-Site": "cross-site", "Origin": base}, {"note": "x", "csrf_token": csrf}, 403),
            ({}, {"note": "x"}, 403),
            ({}, {"note": "x", "csrf_token": tampered}, 403),
        ]
        for headers, form, status in refused:
            response = await client.post(path, headers=headers, data=form)
            assert response.status_code == status, (headers, response.text)
        for kind in ("text/plain", "application/json", "multipart/form-data; boundary=x"):
            body = f"note=x&csrf_token={csrf}"
            response = await client.post(path, headers={"Content-Type": kind}, content=body)
            assert response.status_code == 415 and "application/x-www-form-urlencoded" in response.text
        unchanged = await store.get(row.id or 0)
        assert unchanged is not None and unchanged.review_status == "open"
        assert (await client.post("/logout")).status_code == 403  # a forged logout keeps the session
        assert (await client.get("/api/flagged")).status_code == 200
        ok = await client.post(path, data={"note": "fine", "csrf_token": csrf},
                               headers={"Origin": base, "Sec-Fetch-Site": "same-origin"})
        assert ok.status_code == 303
        assert (await client.post("/logout", data={"csrf_token": csrf})).status_code == 303
        assert (await client.get("/api/flagged")).status_code == 401
        # a bearer client (no cookie, no browser) needs no CSRF token
        api = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
        assert (await client.post(path, headers=api, data={"note": "api"})).json()["review_note"] == "api"


async def test_sessions_are_capped_per_token_and_evict_only_that_tokens_oldest(store: AuditStore):
    access = ConsoleAccess({ACME: "acme", GLOBEX: "globex"}, max_sessions=3)
    app = create_console_app(store, access=access)
    transport = httpx.ASGITransport(app=app)
    base = "http://console.test"
    async with httpx.AsyncClient(transport=transport, base_url=base) as victim:
        await _session(victim, GLOBEX)
        attackers = []
        for _ in range(50):  # a token holder logs in again and again
            client = httpx.AsyncClient(transport=transport, base_url=base)
            await client.get(f"/?token={ACME}")
            attackers.append(client)
        assert (await victim.get("/api/flagged")).status_code == 200  # the other tenant's operator stays in
        alive = [(await c.get("/api/flagged")).status_code for c in attackers]
        assert alive == [401] * 47 + [200] * 3  # the token's own oldest went
        for client in attackers:
            await client.aclose()
