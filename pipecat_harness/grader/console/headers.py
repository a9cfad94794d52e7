"""Response headers every console page carries: a strict CSP, no framing, no sniffing, no caching, no referrer.

Pages need no script; an inline ``<script>`` needs the per-response nonce (``request.state.csp_nonce``) to run. Inline
``style`` is allowed (the stylesheet is inline); recordings play from the console itself (``media-src 'self'``).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response

__all__ = ["content_security_policy", "install_security_headers"]


def content_security_policy(nonce: str) -> str:
    """The console's CSP for one response."""
    return (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )


def install_security_headers(app: FastAPI) -> None:
    """Add the headers to every response of ``app`` (errors included)."""

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        nonce = secrets.token_urlsafe(16)
        request.state.csp_nonce = nonce
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = content_security_policy(nonce)
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response
