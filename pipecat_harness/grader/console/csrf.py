"""Refusing cross-site requests to the console's unsafe routes (reviews, logout).

``SameSite=Strict`` keeps other *sites* from sending the session cookie, but another port of the same host, or a sibling
subdomain, is the same site. So an unsafe request must also come from the console's own origin (``Sec-Fetch-Site``
``same-origin`` or ``none``, else an ``Origin`` equal to the console's), carry a form-encoded body if any (others are
refused unparsed), and, when a session cookie authenticates it, the session's CSRF token in ``csrf_token`` (a
bearer-token request carries no cookie, so needs no token).
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from fastapi import HTTPException, Request
from starlette.requests import ClientDisconnect

from pipecat_harness.grader.console.access import ConsoleAccess

__all__ = ["CSRF_FIELD", "FORM_TYPE", "MAX_FORM_BYTES", "read_checked_form"]

CSRF_FIELD = "csrf_token"
FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 16_384
_OWN_FETCH_SITES = frozenset({"same-origin", "none"})


def _own_origin(request: Request, access: ConsoleAccess) -> str:
    scheme = "https" if access.behind_tls(request) else request.url.scheme
    return f"{scheme}://{request.headers.get('host', '')}"


def _check_origin(request: Request, access: ConsoleAccess) -> None:
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site.lower() not in _OWN_FETCH_SITES:
            raise HTTPException(status_code=403, detail=f"cross-origin request refused (Sec-Fetch-Site: {site})")
        return
    origin = request.headers.get("origin")
    if origin is not None and origin.rstrip("/") != _own_origin(request, access):
        raise HTTPException(status_code=403, detail="cross-origin request refused (Origin is not the console's)")


async def _read_body(request: Request) -> bytes:
    body = bytearray()
    try:
        async for piece in request.stream():
            body.extend(piece)
            if len(body) > MAX_FORM_BYTES:
                raise HTTPException(status_code=413, detail=f"form body exceeds {MAX_FORM_BYTES} bytes")
    except ClientDisconnect:
        raise HTTPException(status_code=400, detail="the form body was cut off") from None
    return bytes(body)


async def read_checked_form(request: Request, access: ConsoleAccess) -> dict[str, list[str]]:
    """The form of an unsafe request that passed every check above.

    Raises:
        HTTPException: 403 for a cross-origin request or a missing/wrong CSRF token, 415 for a body that is not
            form-encoded, 413 for one beyond :data:`MAX_FORM_BYTES`.
    """
    _check_origin(request, access)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind != FORM_TYPE:
        raise HTTPException(status_code=415, detail=f"the console accepts only {FORM_TYPE} bodies, not {kind}")
    declared = request.headers.get("content-length", "0")
    if not kind and declared not in ("", "0"):
        raise HTTPException(status_code=415, detail=f"a request body needs Content-Type: {FORM_TYPE}")
    form = parse_qs((await _read_body(request)).decode("utf-8", "replace")) if kind else {}
    expected = access.csrf_token(request)
    if expected and not hmac.compare_digest(form.get(CSRF_FIELD, [""])[0].encode(), expected.encode()):
        raise HTTPException(status_code=403, detail="missing or wrong CSRF token; reload the page and try again")
    return form
