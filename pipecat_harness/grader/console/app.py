"""FastAPI app of the operator console.

Pages: ``/``, the queue of flagged claims to acknowledge, override or escalate; ``/t/<tenant>/calls/<call>``, the call
as graded, its handoff summary and recording (also ``/transcript`` and ``/audio``); ``/t/<tenant>``, daily rates. A
token sees only its tenants' rows (another tenant's row is a 404); every response carries a strict CSP, no caching.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi import Path as FastAPIPath
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response

from pipecat_harness.grader.audit import REVIEW_STATUS, AuditRow, AuditStore
from pipecat_harness.grader.console import queries, views
from pipecat_harness.grader.console.access import SESSION_COOKIE, ConsoleAccess, Scope, read_checked_form
from pipecat_harness.trace.handoff import Handoff, build_handoff
from pipecat_harness.trace.timeline import Timeline

__all__ = ["COOKIE_NAME", "DEFAULT_MAX_NOTE_CHARS", "MAX_ROW_ID", "content_security_policy", "create_console_app",
           "install_security_headers"]

COOKIE_NAME = SESSION_COOKIE
DEFAULT_MAX_NOTE_CHARS = 2_000
#: Largest audit row id (a signed 64-bit key); a larger one is refused (422) before the store is asked.
MAX_ROW_ID = 2**63 - 1
_RowId = Annotated[int, FastAPIPath(ge=1, le=MAX_ROW_ID)]
_MAX_WHO_CHARS = 128
_AUDIO_TYPES = {".wav": "audio/wav", ".mp3": "audio/mpeg", ".ogg": "audio/ogg", ".webm": "audio/webm"}
_FIXED_HEADERS = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                  "Cache-Control": "no-store"}


def content_security_policy(nonce: str) -> str:
    """The console's CSP for one response (inline style allowed: the stylesheet is inline)."""
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src 'self' data:; "
            "media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def install_security_headers(app: FastAPI) -> None:
    """Add the console's headers to every response of ``app`` (errors included)."""

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        request.state.csp_nonce = secrets.token_urlsafe(16)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = content_security_policy(request.state.csp_nonce)
        response.headers.update(_FIXED_HEADERS)
        return response


def create_console_app(store: AuditStore, token: str | None = None, *, title: str = "Flagged turns",
                       tenant_tokens: Mapping[str, str | Iterable[str]] | None = None,
                       access: ConsoleAccess | None = None, max_note_chars: int = DEFAULT_MAX_NOTE_CHARS,
                       recordings: str | Path | None = None, traces: str | Path | None = None) -> FastAPI:
    """Build the console app over an audit store; ``ValueError`` without a token.

    ``token`` is the admin token (optional with ``tenant_tokens``: token -> the tenants it may see); ``access`` replaces
    both. ``recordings`` and ``traces`` are directories of recordings and of traces (``<call id>.jsonl``) by call id.
    """
    if access is None:
        access = ConsoleAccess(tenant_tokens, [token] if token else [])
    app = FastAPI(title="pipecat-harness console", docs_url=None, redoc_url=None, openapi_url=None)
    install_security_headers(app)
    app.state.access = access
    recordings_dir, traces_dir = (Path(directory) if directory else None for directory in (recordings, traces))
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
        wanted = request.query_params.get("tenant") or None
        if wanted is not None and not scope.allows(wanted):
            raise HTTPException(status_code=403, detail="this token cannot see that tenant")
        return scope.tenants if wanted is None else frozenset([wanted])

    def page_scope(request: Request) -> Scope | Response:
        """The viewer of an HTML page; a ``?token=`` is swapped for a session cookie and leaves the address."""
        given = request.query_params.get("token")
        scope = access.scope(request) if given is None else access.scope_for_token(given)
        if scope is None:
            return HTMLResponse("<h1>401: console token required</h1>", status_code=401)
        if given is None:
            return scope
        # The token leaves the address bar (and the history) at once; the cookie carries a session id.
        query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
        response = RedirectResponse(request.url.path + (f"?{query}" if query else ""), status_code=303)
        access.set_cookie(response, request, scope)
        return response

    def recording(call_id: str) -> Path | None:
        paths = [recordings_dir / f"{call_id}{suffix}" for suffix in _AUDIO_TYPES] if recordings_dir else []
        return next((p for p in paths if p.parent == recordings_dir and p.is_file()), None)  # never out of the dir

    async def handoff(call_id: str) -> Handoff | str | None:
        path = traces_dir / f"{call_id}.jsonl" if traces_dir is not None else None
        if path is None or path.parent != traces_dir or not path.is_file():  # a call id never walks out of it
            return None
        try:
            return await asyncio.to_thread(lambda: build_handoff(Timeline.load(path)))
        except Exception as exc:  # a damaged trace must not take the call page down with it
            return f"The call's trace could not be read ({type(exc).__name__})."

    async def call_rows(scope: Scope, tenant: str, call_id: str) -> list[AuditRow]:
        """The call's rows; 404 when it has none the scope may see (another tenant's call is a missing one)."""
        await ready()
        rows = await queries.call_rows(store, tenant, call_id, scope.tenants) if scope.allows(tenant) else []
        if not rows:
            raise HTTPException(status_code=404, detail=f"no graded turns of call {call_id!r} for {tenant!r}")
        return rows

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request) -> Response:
        if isinstance(scope := page_scope(request), Response):
            return scope
        tenants = visible(scope, request)
        try:
            filters = queries.QueueFilter.from_params(request.query_params)
        except queries.FilterError as exc:
            return HTMLResponse(f"<h1>400: {exc}</h1>", status_code=400)
        await ready()
        rows = await queries.flagged_rows(store, filters, tenants)
        history = await store.history([r.id for r in rows if r.id is not None])
        names = await queries.tenants(store, scope.tenants)
        return HTMLResponse(
            views.queue_page(rows, filters, names, history, title=title, csrf=access.csrf_token(request)))

    @app.get("/t/{tenant}", response_class=HTMLResponse)
    async def tenant_page(request: Request, tenant: str, days: int = 30) -> Response:
        if isinstance(scope := page_scope(request), Response):
            return scope
        if not scope.allows(tenant):
            raise HTTPException(status_code=404, detail=f"no tenant {tenant!r}")
        if not 1 <= days <= 366:
            raise HTTPException(status_code=400, detail="days must be between 1 and 366")
        await ready()
        points = await queries.tenant_rates(store, tenant, days=days)
        return HTMLResponse(views.tenant_page(tenant, points, csrf=access.csrf_token(request)))

    @app.get("/t/{tenant}/calls/{call_id}", response_class=HTMLResponse)
    async def call_page(request: Request, tenant: str, call_id: str) -> Response:
        if isinstance(scope := page_scope(request), Response):
            return scope
        rows = await call_rows(scope, tenant, call_id)
        history = await store.history([r.id for r in rows if r.id is not None])
        has_audio, summary, csrf = recording(call_id) is not None, await handoff(call_id), access.csrf_token(request)
        return HTMLResponse(
            views.call_page(tenant, call_id, rows, history, has_audio=has_audio, handoff=summary, csrf=csrf))

    @app.get("/t/{tenant}/calls/{call_id}/transcript")
    async def transcript(request: Request, tenant: str, call_id: str) -> Response:
        turns = sorted({r.turn_id: r for r in await call_rows(require(request), tenant, call_id)}.items())
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse([{"turn_id": t, "caller": r.caller_utterance, "agent": r.utterance} for t, r in turns])
        return PlainTextResponse("".join((f"caller: {row.caller_utterance}\n" if row.caller_utterance else "")
                                         + f"agent [turn {turn}]: {row.utterance}\n" for turn, row in turns))

    @app.get("/t/{tenant}/calls/{call_id}/audio")
    async def audio(request: Request, tenant: str, call_id: str) -> Response:
        await call_rows(require(request), tenant, call_id)  # 404 unless the viewer may see the call
        if (path := recording(call_id)) is None:
            raise HTTPException(status_code=404, detail=f"no recording of call {call_id!r}")
        return FileResponse(path, media_type=_AUDIO_TYPES[path.suffix])

    @app.get("/api/flagged")
    async def flagged(request: Request) -> JSONResponse:
        tenants = visible(require(request), request)
        try:
            filters = queries.QueueFilter.from_params(request.query_params)
        except queries.FilterError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        await ready()
        return JSONResponse([row.to_dict() for row in await queries.flagged_rows(store, filters, tenants)])

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        await read_checked_form(request, access)
        access.close_session(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.post("/rows/{row_id}/{action}")
    async def review(request: Request, row_id: _RowId, action: str) -> Response:
        scope = require(request)
        if action not in REVIEW_STATUS:
            raise HTTPException(status_code=400, detail=f"unknown action {action!r}; use {sorted(REVIEW_STATUS)}")
        form = await read_checked_form(request, access)
        note, who, back = (form.get(name, [""])[0] for name in ("note", "who", "next"))
        who = who.strip()
        if len(note) > max_note_chars:
            detail = f"review note of {len(note)} characters exceeds the {max_note_chars} limit"
            raise HTTPException(status_code=413, detail=detail)
        if len(who) > _MAX_WHO_CHARS:
            raise HTTPException(status_code=413, detail=f"who exceeds {_MAX_WHO_CHARS} characters")
        await ready()
        if (row := await store.get(row_id)) is None or not scope.allows(row.tenant):
            raise HTTPException(status_code=404, detail=f"no audit row {row_id}")
        try:
            row = await store.review(row_id, action, note, actor=who)
        except KeyError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(row.to_dict())
        if not back.startswith("/") or back.startswith("//") or "\\" in back:
            back = "/"  # only ever back into the console
        return RedirectResponse(f"{back.split('#')[0]}#row-{row_id}", status_code=303)

    return app
