"""FastAPI app of the operator console.

The page is rendered on the server (it works without JavaScript): one card
per flagged turn with the utterance, the caller's turn, the rationale and the
violated constraint inline, and one-click acknowledge / override / escalate
buttons. Every request needs the console token, given once as ``?token=...``
(then kept in an HTTP-only cookie) or as ``Authorization: Bearer ...``.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from html import escape
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from pipecat_harness.grader.audit import REVIEW_STATUS, AuditRow, AuditStore

__all__ = ["COOKIE_NAME", "create_console_app"]

COOKIE_NAME = "harness_console_token"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;background:#f6f7f9;color:#1d2330}
h1{font-size:1.4rem}.card{background:#fff;border-radius:8px;padding:1rem 1.2rem;margin:0 0 1rem;
box-shadow:0 1px 3px #0002;border-left:6px solid #999}.card.critical{border-left-color:#c62828}
.card.warning{border-left-color:#ef6c00}.meta{font-size:.85rem;color:#555}.utterance{font-size:1.1rem;margin:.5rem 0}
.caller{color:#444}.constraint code{background:#eef;padding:0 .3rem}.status{font-weight:600}
form{display:inline}button{margin-right:.4rem;padding:.3rem .8rem;cursor:pointer}
"""


def create_console_app(store: AuditStore, token: str, *, title: str = "Flagged turns") -> FastAPI:
    """Build the console app over an audit store.

    Args:
        store: Audit rows to list and update.
        token: Secret every request must present.
        title: Page heading.

    Raises:
        ValueError: ``token`` is empty.
    """
    if not token:
        raise ValueError("the console needs a token")
    app = FastAPI(title="pipecat-harness console", docs_url=None, redoc_url=None, openapi_url=None)
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

    def require(request: Request) -> None:
        if not authorised(request):
            raise HTTPException(status_code=401, detail="console token required")

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request) -> Response:
        if not authorised(request):
            return HTMLResponse("<h1>401: console token required</h1>", status_code=401)
        await ready()
        rows = await store.flagged()
        response = HTMLResponse(_render(rows, title))
        if request.query_params.get("token"):
            response.set_cookie(COOKIE_NAME, token, httponly=True, samesite="strict")
        return response

    @app.get("/api/flagged")
    async def flagged(request: Request) -> JSONResponse:
        require(request)
        await ready()
        return JSONResponse([row.to_dict() for row in await store.flagged()])

    @app.post("/rows/{row_id}/{action}")
    async def review(request: Request, row_id: int, action: str) -> Response:
        require(request)
        note = parse_qs((await request.body()).decode("utf-8", "replace")).get("note", [""])[0]
        if action not in REVIEW_STATUS:
            raise HTTPException(status_code=400, detail=f"unknown action {action!r}; use {sorted(REVIEW_STATUS)}")
        await ready()
        try:
            row = await store.review(row_id, action, note)
        except KeyError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(row.to_dict())
        return RedirectResponse(f"/#row-{row_id}", status_code=303)

    return app


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
