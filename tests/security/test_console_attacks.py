"""Attacks on a real ``pipecat-harness console`` process (uvicorn on 127.0.0.1, audit rows in PostgreSQL).

Tenant A's token must neither list, read nor change tenant B's rows; the
session cookie must not be the token; every page carries CSP and framing
headers; a huge review note is refused and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest

from pipecat_harness.grader.audit import AuditRow, AuditStore
from tests.security.servers import serving
from tests.services import postgres_url

pytestmark = pytest.mark.postgres

ADMIN, ACME, GLOBEX = "admin-token-1", "acme-token-1", "globex-token-1"
CREDENTIALS = (ADMIN, ACME, GLOBEX)


def _row(tenant: str, turn: int) -> AuditRow:
    return AuditRow(
        tenant=tenant, call_id=f"{tenant}-call", turn_id=turn, utterance=f"{tenant} says $129", caller_utterance="?",
        verdict="unsupported", category="price", claim="$129", constraint_ref="px", rationale="not listed",
        confidence=0.9, grader_model="rules", constraints_version="v1", severity="critical",
    )


async def _setup(url: str, table: str) -> dict[str, list[AuditRow]]:
    store = AuditStore(url, table_name=table)
    await store.create_tables()
    rows = {tenant: [await store.write(_row(tenant, turn)) for turn in (1, 2)] for tenant in ("acme", "globex")}
    await store.close()
    return rows


async def _drop(url: str, table: str) -> None:
    store = AuditStore(url, table_name=table)
    await store.drop_tables()
    await store.close()


@pytest.fixture(scope="module")
def server():
    """One console process for the module (starting one costs seconds); rows of two tenants."""
    url = postgres_url()
    table = f"grader_audit_sec_{uuid.uuid4().hex[:8]}"
    rows = asyncio.run(_setup(url, table))
    env = {
        "PIPECAT_HARNESS_CONSOLE_TOKEN": ADMIN,
        "PIPECAT_HARNESS_CONSOLE_TENANT_TOKENS": json.dumps({ACME: "acme", GLOBEX: ["globex"]}),
    }
    try:
        with serving(["console", "--audit-url", url, "--table", table], env, ready_path="/api/flagged") as base:
            yield base, url, table, rows
    finally:
        asyncio.run(_drop(url, table))


@pytest.fixture
async def console(server):
    base, url, table, rows = server
    store = AuditStore(url, table_name=table)
    try:
        yield base, store, rows
    finally:
        await store.close()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


async def test_a_tenant_token_sees_and_changes_only_its_tenant(console):
    base, store, rows = console
    victim = rows["globex"][0]
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        listed = (await client.get("/api/flagged", headers=_bearer(ACME))).json()
        assert {r["tenant"] for r in listed} == {"acme"} and len(listed) == 2
        assert (await client.get("/api/flagged?tenant=globex", headers=_bearer(ACME))).status_code == 403
        page = await client.get("/", headers=_bearer(ACME))
        assert "acme says" in page.text and "globex says" not in page.text
        for action in ("acknowledge", "override", "escalate"):
            response = await client.post(f"/rows/{victim.id}/{action}", headers=_bearer(ACME), data={"note": "x"})
            assert response.status_code == 404  # as if it did not exist
        assert (await client.post("/rows/999999/escalate", headers=_bearer(ACME))).status_code == 404
        own = rows["acme"][0]
        response = await client.post(f"/rows/{own.id}/escalate", headers=_bearer(ACME), data={"note": "checked"})
        assert response.json()["review_status"] == "escalated"
        admin = (await client.get("/api/flagged", headers=_bearer(ADMIN))).json()
        assert {r["tenant"] for r in admin} == {"acme", "globex"}
        only = (await client.get("/api/flagged?tenant=globex", headers=_bearer(ADMIN))).json()
        assert {r["tenant"] for r in only} == {"globex"}
        for bad in ("", "Bearer nope", f"Bearer {ACME}x", f"Basic {ACME}"):
            assert (await client.get("/api/flagged", headers={"Authorization": bad})).status_code == 401
    unchanged = await store.get(victim.id or 0)
    assert unchanged is not None and unchanged.review_status == victim.review_status and unchanged.review_note == ""


async def test_the_session_cookie_is_a_signed_session_id_not_the_token(console):
    base, _, _ = console
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        response = await client.get(f"/?token={ACME}")
        assert response.status_code == 303 and response.headers["location"] == "/"
        cookie = response.headers["set-cookie"]
        assert ACME not in cookie
        flags = {part.strip().lower() for part in cookie.split(";")}
        assert "httponly" in flags and "samesite=strict" in flags and "secure" not in flags  # plain http here
        page = await client.get("/")
        assert page.status_code == 200 and "acme says" in page.text and "globex says" not in page.text
        csrf = page.text.split("name='csrf_token' value='")[1].split("'")[0]
        value = client.cookies.get("harness_console_session")
        assert value and value.count(".") == 1
        session_id, signature = value.split(".")
        client.cookies.set("harness_console_session", f"{session_id}.{'0' * len(signature)}")
        assert (await client.get("/api/flagged")).status_code == 401
        client.cookies.set("harness_console_session", ACME)
        assert (await client.get("/api/flagged")).status_code == 401
        client.cookies.set("harness_console_session", value)
        assert (await client.post("/logout")).status_code == 403  # not without the session's CSRF token
        assert (await client.post("/logout", data={"csrf_token": csrf})).status_code == 303
        client.cookies.set("harness_console_session", value)
        assert (await client.get("/api/flagged")).status_code == 401  # a closed session stays closed
        behind_tls = await client.get(f"/?token={ACME}", headers={"X-Forwarded-Proto": "https"})
        assert "secure" in {part.strip().lower() for part in behind_tls.headers["set-cookie"].split(";")}


async def test_every_response_forbids_framing_and_inline_scripts(console):
    base, _, _ = console
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for response in (await client.get("/"), await client.get("/", headers=_bearer(ADMIN))):
            csp = response.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp and "script-src 'nonce-" in csp
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["cache-control"] == "no-store"


async def test_a_huge_review_note_is_refused_and_changes_nothing(console):
    base, store, rows = console
    row = rows["acme"][1]
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        too_long = await client.post(f"/rows/{row.id}/override", headers=_bearer(ACME), data={"note": "n" * 2_001})
        assert too_long.status_code == 413 and "2000" in too_long.text
        huge = await client.post(
            f"/rows/{row.id}/override", headers={**_bearer(ACME), "content-type": "application/x-www-form-urlencoded"},
            content=b"note=" + b"n" * 5_000_000,
        )
        assert huge.status_code == 413
        fine = await client.post(f"/rows/{row.id}/override", headers=_bearer(ACME), data={"note": "n" * 2_000})
        assert fine.status_code == 200
    stored = await store.get(row.id or 0)
    assert stored is not None and stored.review_note == "n" * 2_000
