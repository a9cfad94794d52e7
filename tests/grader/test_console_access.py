"""Console access: tenant scopes, signed expiring sessions, security headers (in process, on SQLite)."""

import httpx
import pytest

from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.console import ConsoleAccess, create_console_app


def _row(tenant: str) -> AuditRow:
    return AuditRow(
        tenant=tenant, call_id="c", turn_id=1, utterance=f"{tenant} row", caller_utterance="", verdict="unsupported",
        category="price", claim="x", constraint_ref=None, rationale="r", confidence=1.0, grader_model="rules",
        constraints_version="v1", severity="critical",
    )


def test_tokens_map_to_scopes_and_sessions_expire():
    now = [1000.0]
    tokens = {"a": "acme", "ab": ["acme", "globex"]}
    access = ConsoleAccess(tokens, ["admin"], session_ttl_secs=60, clock=lambda: now[0])
    acme, both, admin = (access.scope_for_token(token) for token in ("a", "ab", "admin"))
    assert acme is not None and both is not None and admin is not None
    assert acme.tenants == frozenset({"acme"}) and not acme.allows("globex") and both.allows("globex") and admin.admin
    assert access.scope_for_token("b") is None and access.scope_for_token("") is None
    cookie = access.open_session(acme)
    assert access.scope_for_cookie(cookie) == acme
    now[0] += 61
    assert access.scope_for_cookie(cookie) is None
    with pytest.raises(ValueError, match="needs a token"):
        ConsoleAccess()
    with pytest.raises(ValueError, match="tenant"):
        ConsoleAccess({"t": []})


async def test_tenant_tokens_list_only_their_rows_and_headers_are_set(sqlite_store: AuditStore):
    acme = await sqlite_store.write(_row("acme"))
    globex = await sqlite_store.write(_row("globex"))
    app = create_console_app(sqlite_store, tenant_tokens={"t-acme": "acme"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as client:
        auth = {"Authorization": "Bearer t-acme", "Accept": "application/json"}
        listed = await client.get("/api/flagged", headers=auth)
        assert [r["id"] for r in listed.json()] == [acme.id]
        assert listed.headers["x-frame-options"] == "DENY"
        assert (await client.post(f"/rows/{globex.id}/override", headers=auth)).status_code == 404
        assert (await client.get("/api/flagged", headers={"Authorization": "Bearer admin"})).status_code == 401
