"""FastAPI app of the operator console.

The page is rendered on the server (it works without JavaScript): one card
per flagged turn with the utterance, the caller's turn, the rationale and the
violated constraint inline, and one-click acknowledge / override / escalate
buttons. Every request needs a console credential (see
:mod:`~pipecat_harness.grader.console.access`): a token as
``Authorization: Bearer ...``, or once as ``?token=...``, after which the
browser holds a signed session cookie instead. A token sees and changes only
its tenants' rows; another tenant's row answers 404, as a missing one does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from pipecat_harness.grader.audit import REVIEW_STATUS, AuditRow, AuditStore
from pipecat_harness.grader.console.access import SESSION_COOKIE, ConsoleAccess, Scope
from pipecat_harness.grader.console.headers import install_security_headers

__all__ = ["COOKIE_NAME", "DEFAULT_MAX_NOTE_CHARS", "create_console_app"]

COOKIE_NAME = SESSION_COOKIE
DEFAULT_MAX_NOTE_CHARS = 2_000
_MAX_FORM_BYTES = 16_384

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;background:#f6f7f9;color:#1d2330}
h1{font-size:1.4rem}.card{background:#fff;border-radius:8px;padding:1rem 1.2rem;margin:0 0 1rem;
box-shadow:0 1px 3px #0002;border-left:6px solid #999}.card.critical{border-left-color:#c62828}
.card.warning{border-left-color:#ef6c00}.meta{font-size:.85rem;color:#555}.utterance{font-size:1.1rem;margin:.5rem 0}
.caller{color:#444}.constraint code{background:#eef;padding:0 .3rem}.status{font-weight:600}
form{display:inline}button{margin-right:.4rem;padding:.3rem .8rem;cursor:pointer}
"""


def create_console_app(
    store: AuditStore,
    token: str | None = None,
    *,
    title: str = "Flagged turns",
    tenant_tokens: Mapping[str, str | Iterable[str]] | None = None,
    access: ConsoleAccess | None = None,
    max_note_chars: int = DEFAULT_MAX_NOTE_CHARS,
) -> FastAPI:
    """Build the console app over an audit store.

    Args:
        store: Audit rows to list and update.
        token: Admin token: sees every tenant (optional when ``tenant_tokens`` are given).
        title: Page heading.
        tenant_tokens: Token -> the tenant (or tenants) whose rows it may see and review.
        access: A ready :class:`ConsoleAccess` (instead of ``token`` and ``tenant_tokens``).
        max_note_chars: Longest review note.

    Raises:
        ValueError: No token at all, or an empty one.
    """
    if access is None:
        access = ConsoleAccess(tenant_tokens, [token] if token else [])
    app = FastAPI(title="pipecat-harness console", docs_url=None, redoc_url=None, openapi_url=None)
    install_security_headers(app)
    app.state.access = access
    tables_ready = False

    async def ready() -> None:
        nonlocal tables_ready
        if not tables_ready:
            await store.create_tables()
            tables_ready = True

    def require(request: Request) -> Scope:
        scope = access.scope(request)
        if scope is None:
            raise HTTPException(status_code=401, detail="console token required")
        return scope

    def visible(scope: Scope, request: Request) -> frozenset[str] | None:
        """The tenants to list: the scope's, narrowed by ``?tenant=``."""
        wanted = request.query_params.get("tenant")
        if wanted is None:
            return scope.tenants
        if not scope.allows(wanted):
            raise HTTPException(status_code=403, detail="this token cannot see that tenant")
        return frozenset([wanted])

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request) -> Response:
        given = request.query_params.get("token")
        if given is not None:
            scope = access.scope_for_token(given)
            if scope is None:
                return HTMLResponse("<h1>401: console token required</h1>", status_code=401)
            # The token leaves the address bar (and the history) at once; the cookie carries a session id.
            query = "&".join(f"{k}={v}" for k, v in request.query_params.multi_items() if k != "token")
            response = RedirectResponse("/" + (f"?{query}" if query else ""), status_code=303)
            access.set_cookie(response, request, scope)
            return response
        scope = access.scope(request)
        if scope is None:
            return HTMLResponse("<h1>401: console token required</h1>", status_code=401)
        tenants = visible(scope, request)
        await ready()
        return HTMLResponse(_render(await store.flagged(tenants=tenants), title))

    @app.get("/api/flagged")
    async def flagged(request: Request) -> JSONResponse:
        tenants = visible(require(request), request)
        await ready()
        return JSONResponse([row.to_dict() for row in await store.flagged(tenants=tenants)])

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        access.close_session(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.post("/rows/{row_id}/{action}")
    async def review(request: Request, row_id: int, action: str) -> Response:
        scope = require(request)
        if action not in REVIEW_STATUS:
            raise HTTPException(status_code=400, detail=f"unknown action {action!r}; use {sorted(REVIEW_STATUS)}")
        body = await _read_form(request)
        note = parse_qs(body.decode("utf-8", "replace")).get("note", [""])[0]
        if len(note) > max_note_chars:
            raise HTTPException(
                status_code=413, detail=f"review note of {len(note)} characters exceeds the {max_note_chars} limit"
            )
        await ready()
        row = await store.get(row_id)
        if row is None or not scope.allows(row.tenant):
            raise HTTPException(status_code=404, detail=f"no audit row {row_id}")
        try:
            row = await store.review(row_id, action, note)
        except KeyError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(row.to_dict())
        return RedirectResponse(f"/#row-{row_id}", status_code=303)

    return app


async def _read_form(request: Request) -> bytes:
    """The form body, refused beyond :data:`_MAX_FORM_BYTES` (a note is short text)."""
    body = bytearray()
    async for piece in request.stream():
        body.extend(piece)
        if len(body) > _MAX_FORM_BYTES:
            raise HTTPException(status_code=413, detail=f"form body exceeds {_MAX_FORM_BYTES} bytes")
    return bytes(body)


def _render(rows: list[AuditRow], title: str) -> str:
    cards = "\n".join(_card(row) for row in rows) or '<p id="empty">No flagged turns.</p>'
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)} ({len(rows)})</h1>"
        f"<main id='cards'>{cards}</main></body></html>"
    )


def _card(row: AuditRow) -> str:
    when = datetime.fromtimestamp(row.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    caller = f"<p class='caller'>Caller: “{escape(row.caller_utterance)}”</p>" if row.caller_utterance else ""
    buttons = "".join(
        f"<form method='post' action='/rows/{row.id}/{action}'>"
        f"<button type='submit' class='action-{action}'>{action.capitalize()}</button></form>"
        for action in REVIEW_STATUS
    )
    return f"""<article class="card {escape(row.severity)}" id="row-{row.id}" data-row-id="{row.id}"
 data-status="{escape(row.review_status)}" data-verdict="{escape(row.verdict)}" data-category="{escape(row.category)}">
<div class="meta">{escape(row.severity).upper()} · {escape(row.category)} · {escape(row.verdict)} ·
call {escape(row.call_id)} turn {row.turn_id} · {when} · {escape(row.grader_model)} ·
list {escape(row.constraints_version)}</div>
<p class="utterance">Agent: “{escape(row.utterance)}”</p>{caller}
<p class="rationale">{escape(row.rationale)}</p>
<p class="constraint">Constraint: <code>{escape(row.constraint_ref or "none")}</code></p>
<p>Status: <span class="status">{escape(row.review_status)}</span></p>
<div class="actions">{buttons}</div></article>"""
