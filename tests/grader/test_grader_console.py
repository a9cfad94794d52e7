import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from markupsafe import escape

from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.console import create_console_app
from pipecat_harness.grader.console.app import COOKIE_NAME
from pipecat_harness.grader.console.queries import tenant_rates
from tests.grader.grader_browser import chromium_page

TOKEN = "console-token"
DAY = 86400.0


async def add(store: AuditStore, turn: int, verdict: str, utterance: str, ref: str | None = "px_basic", *,
              tenant: str = "sparkle", call: str = "call-c", category: str = "price", caller: str = "How much?",
              at: float | None = None) -> AuditRow:
    return await store.write(AuditRow(
        tenant=tenant, call_id=call, turn_id=turn, utterance=utterance, caller_utterance=caller,
        verdict=verdict, category=category, claim=utterance, constraint_ref=ref,
        rationale=f"rationale of turn {turn}", confidence=0.9, grader_model="rules", constraints_version="v7",
        severity="critical" if verdict == "unsupported" else ("warning" if verdict == "llm_flagged" else "info"),
        created_at=at or time.time()))


async def seed_call(store: AuditStore) -> list[AuditRow]:
    """A four-turn call with a wrong price in turn 2 and a transfer it cannot make in turn 4."""
    return [
        await add(store, 1, "supported", "Thanks for calling Sparkle, how can I help?", None, caller="Hi.",
                  category="none", call="call_5af2"),
        await add(store, 2, "unsupported", "A basic detail runs about $129.", call="call_5af2",
                  caller="How much for a basic detail?"),
        await add(store, 3, "supported", "We're open until six today.", "hours.fri", category="hours",
                  call="call_5af2", caller="Are you open today?"),
        await add(store, 4, "unsupported", "I can transfer you to our manager, Dave.", "capabilities",
                  category="capability", call="call_5af2", caller="Can I talk to a manager?"),
    ]


@contextlib.asynccontextmanager
async def serve(store: AuditStore, recordings: Path | None = None) -> AsyncIterator[str]:
    """Run the console on a free loopback port for the duration of the block."""
    app = create_console_app(store, TOKEN, recordings=recordings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
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


def client_for(store: AuditStore, recordings: Path | None = None) -> httpx.AsyncClient:
    app = create_console_app(store, TOKEN, recordings=recordings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console",
                             headers={"Authorization": f"Bearer {TOKEN}"})


def ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r"id='card-(\d+)'", html)]


async def test_token_lists_flagged_newest_first_and_actions_persist_with_history(sqlite_store: AuditStore) -> None:
    await add(sqlite_store, 1, "supported", "The interior detail is $99.")
    first = await add(sqlite_store, 2, "unsupported", "The basic detail is $129.")
    second = await add(sqlite_store, 3, "llm_flagged", "We might be open late <b>tonight</b>.", ref=None)
    app = create_console_app(sqlite_store, TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console", follow_redirects=True) as client:
        for path in ("/", "/?token=wrong", "/api/flagged", "/t/sparkle", "/t/sparkle/calls/call-c",
                     "/t/sparkle/calls/call-c/transcript", "/t/sparkle/calls/call-c?token=wrong"):
            assert (await client.get(path)).status_code == 401, path
        swap = await client.get(f"/t/sparkle/calls/call-c?token={TOKEN}", follow_redirects=False)
        assert swap.status_code == 303 and swap.headers["location"] == "/t/sparkle/calls/call-c"
        assert TOKEN not in swap.headers["set-cookie"] and COOKIE_NAME in swap.headers["set-cookie"]
        page = await client.get(f"/?token={TOKEN}")
        assert page.status_code == 200 and str(page.url) == "http://console/"
        html = page.text
        assert ids(html) == [second.id, first.id]
        assert "The interior detail" not in html
        assert "&lt;b&gt;tonight&lt;/b&gt;" in html  # utterances are escaped
        assert "rationale of turn 2" in html and "<code>px_basic</code>" in html
        assert "<script" not in html and "style=" not in html  # works under a strict CSP
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
        for action, status in (("acknowledge", "acknowledged"), ("override", "overridden"),
                               ("escalate", "escalated")):
            response = await client.post(f"/rows/{first.id}/{action}", headers=headers,
                                         data={"note": f"{action} note", "who": "dana"})
            assert response.json()["review_status"] == status
        assert (await client.post(f"/rows/{first.id}/delete", headers=headers)).status_code == 400
        assert (await client.post("/rows/999/escalate", headers=headers)).status_code == 404
        redirect = await client.post(f"/rows/{second.id}/acknowledge", headers={"Authorization": f"Bearer {TOKEN}"},
                                     data={"next": "//evil.example/", "who": "sam"}, follow_redirects=False)
        assert redirect.status_code == 303 and redirect.headers["location"] == f"/#row-{second.id}"
        client.cookies.clear()
        assert (await client.post(f"/rows/{first.id}/escalate")).status_code == 401
    stored = await sqlite_store.get(first.id or 0)
    assert stored is not None and (stored.review_status, stored.review_note) == ("escalated", "escalate note")
    history = (await sqlite_store.history([first.id or 0]))[first.id or 0]
    assert [(e.action, e.actor, e.note) for e in history] == [
        ("acknowledge", "dana", "acknowledge note"), ("override", "dana", "override note"),
        ("escalate", "dana", "escalate note")]
    assert history[0].at <= history[-1].at <= time.time()


async def test_queue_filters(sqlite_store: AuditStore) -> None:
    now = time.time()
    old = await add(sqlite_store, 1, "unsupported", "Basic is $129.", at=now - 10 * DAY)
    hours = await add(sqlite_store, 2, "unsupported", "We're open Sundays.", "hours.sun", category="hours")
    other = await add(sqlite_store, 1, "llm_flagged", "Maybe.", None, tenant="acme", call="call-a")
    await sqlite_store.review(hours.id or 0, "escalate", "check", actor="dana")
    today = datetime.now(UTC).date()
    async with client_for(sqlite_store) as client:
        async def listed(query: str) -> list[int]:
            response = await client.get(f"/?{query}")
            assert response.status_code == 200, response.text
            return ids(response.text)

        assert await listed("") == [other.id, hours.id, old.id]
        assert await listed("tenant=sparkle") == [hours.id, old.id]
        assert await listed("severity=warning") == [other.id]
        assert await listed("category=hours") == [hours.id]
        assert await listed("status=escalated") == [hours.id]
        assert await listed("status=open&tenant=sparkle") == [old.id]
        assert await listed(f"since={today.isoformat()}") == [other.id, hours.id]
        assert await listed(f"until={(today - timedelta(days=5)).isoformat()}") == [old.id]
        page = await client.get("/?tenant=sparkle&category=hours")
        assert "<option value='hours' selected>" in page.text  # the form shows the filters in force
        for bad in ("severity=loud", "category=weather", "status=done", "since=yesterday"):
            response = await client.get(f"/?{bad}")
            assert response.status_code == 400 and bad.split("=")[0] in response.text
        api = await client.get("/api/flagged?tenant=acme")
        assert [r["id"] for r in api.json()] == [other.id]
        assert (await client.get("/api/flagged?severity=loud")).status_code == 400


async def test_call_view_transcript_audio_and_tenant_page(sqlite_store: AuditStore, tmp_path: Path) -> None:
    rows = await seed_call(sqlite_store)
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    async with client_for(sqlite_store, recordings) as client:
        page = await client.get("/t/sparkle/calls/call_5af2")
        html = page.text
        said = [html.index(str(escape(r.utterance))) for r in rows]
        assert said == sorted(said)  # the whole transcript, in turn order
        assert html.index("How much for a basic detail?") < said[1]
        flagged = re.findall(r"<article class='(turn[^']*)' id='turn_(\d+)'", html)
        assert flagged == [("turn", "001"), ("turn flagged critical", "002"), ("turn", "003"),
                           ("turn flagged critical", "004")]
        assert "rationale of turn 2" in html and "<code>px_basic</code>" in html and "v7" in html
        assert "id='no-recording'" in html
        assert (await client.get("/t/sparkle/calls/call_5af2/audio")).status_code == 404
        (recordings / "call_5af2.wav").write_bytes(b"RIFF0000WAVEfmt ")
        html = (await client.get("/t/sparkle/calls/call_5af2")).text
        assert "<audio id='recording' controls" in html and "/t/sparkle/calls/call_5af2/audio" in html
        audio = await client.get("/t/sparkle/calls/call_5af2/audio")
        assert audio.status_code == 200 and audio.headers["content-type"] == "audio/wav"
        transcript = await client.get("/t/sparkle/calls/call_5af2/transcript")
        assert transcript.text.splitlines()[:3] == [
            "caller: Hi.", "agent [turn 1]: Thanks for calling Sparkle, how can I help?",
            "caller: How much for a basic detail?"]
        assert (await client.get("/t/sparkle/calls/nope")).status_code == 404
        assert (await client.get("/t/acme/calls/call_5af2")).status_code == 404
        tenant = await client.get("/t/sparkle")
        assert "<svg id='rate-chart'" in tenant.text and "class='flag-rate'" in tenant.text
        assert (await client.get("/t/sparkle?days=0")).status_code == 400


async def test_tenant_rates_count_turns_not_claims(sqlite_store: AuditStore) -> None:
    today = date(2026, 5, 20)
    noon = datetime(2026, 5, 20, 12, tzinfo=UTC).timestamp()
    await add(sqlite_store, 1, "unsupported", "a", call="c1", at=noon)
    await add(sqlite_store, 1, "unsupported", "a", call="c1", at=noon)  # two claims, one turn
    await add(sqlite_store, 2, "supported", "b", call="c1", at=noon)
    await add(sqlite_store, 3, "out_of_scope", "c", call="c1", at=noon)
    await add(sqlite_store, 1, "supported", "d", call="c2", at=noon - DAY)
    await add(sqlite_store, 1, "unsupported", "e", call="c3", at=noon, tenant="acme")
    points = await tenant_rates(sqlite_store, "sparkle", days=3, today=today)
    assert [(p.day.isoformat(), p.turns, p.flagged, p.out_of_scope) for p in points] == [
        ("2026-05-18", 0, 0, 0), ("2026-05-19", 1, 0, 0), ("2026-05-20", 3, 1, 1)]
    assert (points[2].flag_rate, points[2].out_of_scope_rate) == (pytest.approx(1 / 3), pytest.approx(1 / 3))


async def test_a_tenant_token_sees_only_its_tenants_calls_and_pages(sqlite_store: AuditStore) -> None:
    await seed_call(sqlite_store)
    await add(sqlite_store, 1, "unsupported", "We're open Sundays.", "hours.sun", tenant="acme", call="call-a")
    app = create_console_app(sqlite_store, TOKEN, tenant_tokens={"acme-token": "acme"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console",
                                 headers={"Authorization": "Bearer acme-token"}) as client:
        assert ids((await client.get("/")).text) and "Sparkle" not in (await client.get("/")).text
        assert (await client.get("/?tenant=sparkle")).status_code == 403
        for path in ("/t/sparkle", "/t/sparkle/calls/call_5af2", "/t/sparkle/calls/call_5af2/transcript",
                     "/t/sparkle/calls/call_5af2/audio"):
            assert (await client.get(path)).status_code == 404, path
        assert (await client.get("/t/acme/calls/call-a")).status_code == 200
        assert "content-security-policy" in (await client.get("/t/acme")).headers


def test_the_console_needs_a_token(sqlite_store: AuditStore) -> None:
    with pytest.raises(ValueError, match="token"):
        create_console_app(sqlite_store, "")


def _share(image: object, rgb: tuple[int, int, int], tolerance: int = 24) -> float:
    """Fraction of an image's pixels within ``tolerance`` of a colour."""
    pixels = list(image.getdata())  # type: ignore[attr-defined]
    near = sum(all(abs(a - b) <= tolerance for a, b in zip(p, rgb, strict=True)) for p in pixels)
    return near / len(pixels)


HIGHLIGHT = (0xFF, 0xD5, 0x4F)  # the flagged agent line's background in console.css
FLAG_RED = (0xC6, 0x28, 0x28)
OOS_BLUE = (0x15, 0x65, 0xC0)


@pytest.mark.chromium
async def test_call_view_highlights_the_flagged_turn_and_actions_keep_history_in_chromium(
    sqlite_store: AuditStore,
) -> None:
    rows = await seed_call(sqlite_store)
    wrong_price = rows[1]
    async with serve(sqlite_store) as base, chromium_page() as page:
        await page.goto(f"{base}/t/sparkle/calls/call_5af2")
        assert "401" in await page.evaluate("document.body.innerText")
        await page.goto(f"{base}/t/sparkle/calls/call_5af2?token={TOKEN}#turn_002")
        await page.wait_for("document.styleSheets.length > 0 && getComputedStyle(document.body).margin === '32px'")
        flagged = await page.screenshot("#turn_002 .agent-line")
        plain = await page.screenshot("#turn_003 .agent-line")
        assert _share(flagged, HIGHLIGHT) > 0.5 and _share(plain, HIGHLIGHT) < 0.01
        turn_text = await page.evaluate("document.querySelector('#turn_002').innerText")
        assert "A basic detail runs about $129." in turn_text and "rationale of turn 2" in turn_text
        assert "px_basic" in turn_text and "v7" in turn_text
        order = await page.evaluate("[...document.querySelectorAll('#transcript .said')].map(e => e.innerText)")
        assert order[:4] == ["Hi.", "Thanks for calling Sparkle, how can I help?", "How much for a basic detail?",
                             "A basic detail runs about $129."]
        await page.evaluate(f"""(() => {{
            const box = document.querySelector('#row-{wrong_price.id}');
            box.querySelector('.note').value = 'quoted below the list price';
            box.querySelector('.who').value = 'dana';
            box.querySelector('.action-escalate').click(); }})()""")
        await page.wait_for(f"document.querySelector('#row-{wrong_price.id}')?.dataset.status === 'escalated'")
        assert (await page.evaluate("location.pathname")) == "/t/sparkle/calls/call_5af2"
        history = await page.evaluate(f"document.querySelector('#row-{wrong_price.id} .history').innerText")
        assert "escalate by dana" in history and "quoted below the list price" in history
    stored = await sqlite_store.get(wrong_price.id or 0)
    assert stored is not None and stored.review_status == "escalated"


@pytest.mark.chromium
async def test_queue_filters_and_tenant_chart_in_chromium(sqlite_store: AuditStore) -> None:
    now = time.time()
    for day in range(7):
        stamp = now - day * DAY
        for turn in range(1, 5):
            verdict = "unsupported" if turn <= (3 if day == 0 else 2) else "supported"
            await add(sqlite_store, turn, verdict, f"turn {turn} of day {day}", call=f"call-{day}", at=stamp)
        await add(sqlite_store, 5, "out_of_scope", "we have valet parking", None, call=f"call-{day}",
                  category="capability", at=stamp)
    await add(sqlite_store, 1, "unsupported", "We're open Sundays.", "hours.sun", tenant="acme", category="hours",
              call="call-acme")
    async with serve(sqlite_store) as base, chromium_page() as page:
        await page.goto(f"{base}/?token={TOKEN}")
        assert await page.evaluate("document.querySelectorAll('article.card').length") == 16
        await page.evaluate("""(() => {
            document.querySelector("select[name='tenant']").value = 'acme';
            document.querySelector("select[name='category']").value = 'hours';
            document.querySelector('#apply-filters').click(); })()""")
        await page.wait_for("location.search.includes('tenant=acme')")
        await page.wait_for("document.readyState === 'complete'")
        cards = await page.evaluate("[...document.querySelectorAll('article.card')].map(c => c.dataset.tenant)")
        assert cards == ["acme"]
        link = await page.evaluate("document.querySelector('a.call-link').getAttribute('href')")
        assert link == "/t/acme/calls/call-acme#turn_001"

        await page.goto(f"{base}/t/sparkle?days=7")
        await page.wait_for("document.styleSheets.length > 0")
        chart = await page.screenshot("#rate-chart")
        assert _share(chart, FLAG_RED) > 0.003 and _share(chart, OOS_BLUE) > 0.003
        # The flag-rate line peaks on the last day (today: 3 of 5 turns flagged, other days 2 of 5).
        width, height = chart.size
        red = [(x, y) for x in range(width) for y in range(height)
               if all(abs(a - b) <= 24 for a, b in zip(chart.getpixel((x, y)), FLAG_RED, strict=True))]
        highest = min(red, key=lambda p: p[1])
        assert highest[0] > width * 0.8
        rates = await page.evaluate("[...document.querySelectorAll('#rates td.flag-rate')].map(e => e.innerText)")
        assert rates == ["40.0%"] * 6 + ["60.0%"]
        oos = await page.evaluate("[...document.querySelectorAll('#rates td.oos-rate')].map(e => e.innerText)")
        assert oos == ["20.0%"] * 7
