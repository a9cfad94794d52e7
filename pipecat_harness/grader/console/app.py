"""FastAPI app of the operator console.

Pages (rendered on the server by :mod:`~pipecat_harness.grader.console.views`,
no JavaScript needed):

* ``/``: the queue of flagged claims, newest first, filterable by tenant,
  severity, category, review status and date, each with acknowledge /
  override / escalate (a note and who, kept in the row's history);
* ``/t/<tenant>/calls/<call>``: the call's whole transcript as graded, the
  flagged turns highlighted in place (``#turn_018``) with the rationale, the
  constraint and the constraint list version, and the recording when
  ``recordings`` holds ``<call>.wav`` (``.mp3``, ``.ogg``, ``.webm``); its
  ``/transcript`` and ``/audio`` are the alert payload's other links;
* ``/t/<tenant>``: the tenant's flag rate and out_of_scope rate per day, as a chart.

Every request needs the console token, given once as ``?token=...``
(then kept in an HTTP-only cookie) or as ``Authorization: Bearer ...``.
What a request may see is an :class:`Access` (today: every tenant); pages and
queries take its tenants, so scoping access happens in :func:`create_console_app`'s
``access`` alone.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response

from pipecat_harness.grader.audit import REVIEW_STATUS, AuditStore
from pipecat_harness.grader.console import queries, views

__all__ = ["COOKIE_NAME", "Access", "create_console_app"]

COOKIE_NAME = "harness_console_token"
_STATIC = Path(__file__).resolve().parent / "static"
_AUDIO_TYPES = {".wav": "audio/wav", ".mp3": "audio/mpeg", ".ogg": "audio/ogg", ".webm": "audio/webm"}


@dataclass(frozen=True)
class Access:
    """What one request may see and who is asking.

    Parameters:
        tenants: Tenants visible (``None``: all).
        actor: Who acts, when the credentials say so ("" otherwise: the review form's "who").
    """

    tenants: frozenset[str] | None = None
    actor: str = ""

    def sees(self, tenant: str) -> bool:
        """Whether the tenant is visible."""
        return self.tenants is None or tenant in self.tenants


def create_console_app(
    store: AuditStore, token: str, *, title: str = "Flagged turns", recordings: str | Path | None = None
) -> FastAPI:
    """Build the console app over an audit store.

    Args:
        store: Audit rows to list and update.
        token: Secret every request must present.
        title: Page heading (kept for callers; the queue page says "Flagged turns").
        recordings: Directory of call recordings named by call id.

    Raises:
        ValueError: ``token`` is empty.
    """
    if not token:
        raise ValueError("the console needs a token")
    app = FastAPI(title="pipecat-harness console", docs_url=None, redoc_url=None, openapi_url=None)
    recordings_dir = Path(recordings) if recordings else None
    tables_ready = False

    async def ready() -> None:
        nonlocal tables_ready
        if not tables_ready:
            await store.create_tables()
            tables_ready = True

    def authorised(request: Request) -> bool:
        given = request.query_params.get("token") or request.cookies.get(COOKIE_NAME) or ""
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            given = header[7:]
        return hmac.compare_digest(given.encode(), token.encode())

    def access(request: Request) -> Access:
        if not authorised(request):
            raise HTTPException(status_code=401, detail="console token required")
        return Access()

    def page_access(request: Request) -> Access | None:
        try:
            return access(request)
        except HTTPException:
            return None

    def html(request: Request, body: str) -> HTMLResponse:
        response = HTMLResponse(body)
        if request.query_params.get("token"):
            response.set_cookie(COOKIE_NAME, token, httponly=True, samesite="strict")
        return response

    def recording(call_id: str) -> Path | None:
        if recordings_dir is None:
            return None
        for suffix in _AUDIO_TYPES:
            path = recordings_dir / f"{call_id}{suffix}"
            if path.name == f"{call_id}{suffix}" and path.is_file():  # a call id never walks out of the directory
                return path
        return None

    _unauthorised = HTMLResponse("<h1>401: console token required</h1>", status_code=401)

    @app.get("/static/console.css")
    async def stylesheet() -> FileResponse:
        return FileResponse(_STATIC / "console.css", media_type="text/css")

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request) -> Response:
        viewer = page_access(request)
        if viewer is None:
            return _unauthorised
        try:
            filters = queries.QueueFilter.from_params(request.query_params)
        except queries.FilterError as exc:
            return HTMLResponse(f"<h1>400: {exc}</h1>", status_code=400)
        await ready()
        rows = await queries.flagged_rows(store, filters, viewer.tenants)
        history = await store.history([r.id for r in rows if r.id is not None])
        names = await queries.tenants(store, viewer.tenants)
        return html(request, views.queue_page(rows, filters, names, history))

    @app.get("/t/{tenant}", response_class=HTMLResponse)
    async def tenant_page(request: Request, tenant: str, days: int = 30) -> Response:
        viewer = page_access(request)
        if viewer is None:
            return _unauthorised
        if not viewer.sees(tenant):
            raise HTTPException(status_code=404, detail=f"no tenant {tenant!r}")
        if not 1 <= days <= 366:
            raise HTTPException(status_code=400, detail="days must be between 1 and 366")
        await ready()
        return html(request, views.tenant_page(tenant, await queries.tenant_rates(store, tenant, days=days)))

    @app.get("/t/{tenant}/calls/{call_id}", response_class=HTMLResponse)
    async def call_page(request: Request, tenant: str, call_id: str) -> Response:
        viewer = page_access(request)
        if viewer is None:
            return _unauthorised
        await ready()
        rows = await queries.call_rows(store, tenant, call_id, viewer.tenants)
        if not rows:
            raise HTTPException(status_code=404, detail=f"no graded turns of call {call_id!r} for {tenant!r}")
        history = await store.history([r.id for r in rows if r.id is not None])
        return html(request, views.call_page(tenant, call_id, rows, history, has_audio=recording(call_id) is not None))

    @app.get("/t/{tenant}/calls/{call_id}/transcript")
    async def transcript(request: Request, tenant: str, call_id: str) -> Response:
        viewer = access(request)
        await ready()
        rows = await queries.call_rows(store, tenant, call_id, viewer.tenants)
        if not rows:
            raise HTTPException(status_code=404, detail=f"no graded turns of call {call_id!r} for {tenant!r}")
        turns = {r.turn_id: r for r in rows}
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse([{"turn_id": t, "caller": r.caller_utterance, "agent": r.utterance}
                                 for t, r in sorted(turns.items())])
        lines = []
        for turn, row in sorted(turns.items()):
            if row.caller_utterance:
                lines.append(f"caller: {row.caller_utterance}")
            lines.append(f"agent [turn {turn}]: {row.utterance}")
        return PlainTextResponse("\n".join(lines) + "\n")

    @app.get("/t/{tenant}/calls/{call_id}/audio")
    async def audio(request: Request, tenant: str, call_id: str) -> Response:
        viewer = access(request)
        await ready()
        if not viewer.sees(tenant) or not await queries.call_rows(store, tenant, call_id, viewer.tenants):
            raise HTTPException(status_code=404, detail=f"no call {call_id!r} for {tenant!r}")
        path = recording(call_id)
        if path is None:
            raise HTTPException(status_code=404, detail=f"no recording of call {call_id!r}")
        return FileResponse(path, media_type=_AUDIO_TYPES[path.suffix])

    @app.get("/api/flagged")
    async def flagged(request: Request) -> JSONResponse:
        viewer = access(request)
        try:
            filters = queries.QueueFilter.from_params(request.query_params)
        except queries.FilterError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        await ready()
        return JSONResponse([row.to_dict() for row in await queries.flagged_rows(store, filters, viewer.tenants)])

    @app.post("/rows/{row_id}/{action}")
    async def review(request: Request, row_id: int, action: str) -> Response:
        viewer = access(request)
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        note = form.get("note", [""])[0].strip()
        who = viewer.actor or form.get("who", [""])[0].strip()
        back = form.get("next", [""])[0]
        if action not in REVIEW_STATUS:
            raise HTTPException(status_code=400, detail=f"unknown action {action!r}; use {sorted(REVIEW_STATUS)}")
        if len(note) > 2000 or len(who) > 128:
            raise HTTPException(status_code=400, detail="note (2000) or who (128 characters) is too long")
        await ready()
        existing = await store.get(row_id)
        if existing is None or not viewer.sees(existing.tenant):
            raise HTTPException(status_code=404, detail=f"no audit row {row_id}")
        row = await store.review(row_id, action, note, actor=who)
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(row.to_dict())
        if not back.startswith("/") or back.startswith("//"):
            back = "/"  # only ever back into the console
        anchor = f"#row-{row_id}" if "#" not in back else ""
        return RedirectResponse(f"{back}{anchor}", status_code=303)

    return app
