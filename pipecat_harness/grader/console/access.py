"""Who may use the operator console, which tenants' rows they see, and which unsafe requests it accepts.

A token belongs to one tenant (or a few), an admin token to all; tokens are compared in constant time. A browser swaps
its ``?token=`` for a signed session cookie; a session's CSRF token is derived from its id and the console's key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from fastapi import HTTPException, Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

__all__ = ["CSRF_FIELD", "FORM_TYPE", "MAX_FORM_BYTES", "SESSION_COOKIE", "ConsoleAccess", "Scope", "read_checked_form"]

SESSION_COOKIE = "harness_console_session"
CSRF_FIELD = "csrf_token"
FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 16_384
_OWN_FETCH_SITES = frozenset({"same-origin", "none"})


@dataclass(frozen=True)
class Scope:
    """The tenants one credential may see (``None``: every tenant); ``owner`` names the token (not its value)."""

    tenants: frozenset[str] | None
    owner: str = field(default="", compare=False, repr=False)

    @property
    def admin(self) -> bool:
        """Whether every tenant is visible."""
        return self.tenants is None

    def allows(self, tenant: str) -> bool:
        """Whether rows of ``tenant`` are visible."""
        return self.tenants is None or tenant in self.tenants


@dataclass
class _Session:
    scope: Scope
    expires: float


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class ConsoleAccess:
    """Console tokens (tenant tokens: token -> tenant or tenants; admin tokens), their scopes and browser sessions."""

    def __init__(self, tenant_tokens: Mapping[str, str | Iterable[str]] | None = None, admin_tokens: Iterable[str] = (),
                 *, session_ttl_secs: float = 8 * 3600.0, max_sessions: int = 100,
                 clock: Callable[[], float] = time.time) -> None:
        self._tokens: list[tuple[bytes, Scope]] = []
        for token, tenants in (tenant_tokens or {}).items():
            names = frozenset([tenants] if isinstance(tenants, str) else tenants)
            if not token or not names or not all(names):
                raise ValueError("every console tenant token must be non-empty and name at least one tenant")
            self._tokens.append((_digest(token), Scope(names, _digest(f"owner:{token}").hex()[:16])))
        for token in admin_tokens:
            if not token:
                raise ValueError("the console admin token must not be empty")
            self._tokens.append((_digest(token), Scope(None, _digest(f"owner:{token}").hex()[:16])))
        if not self._tokens:
            raise ValueError("the console needs a token: an admin token or at least one tenant token")
        self._key = secrets.token_bytes(32)
        self._sessions: dict[str, _Session] = {}  # oldest first
        self.session_ttl_secs = session_ttl_secs
        self.max_sessions = max_sessions
        self._clock = clock

    def scope_for_token(self, token: str | None) -> Scope | None:
        """The scope of ``token``, or ``None`` when it is not a console token."""
        probe = _digest(token or "")
        found = [scope for digest, scope in self._tokens if hmac.compare_digest(probe, digest)]  # every one compared
        return found[0] if found and token else None

    def _sign(self, session_id: str) -> str:
        return hmac.new(self._key, session_id.encode(), hashlib.sha256).hexdigest()

    def open_session(self, scope: Scope) -> str:
        """Start a session, return its cookie; at ``max_sessions`` the token's expired, else oldest, ones close."""
        now = self._clock()
        owned = [sid for sid, session in self._sessions.items() if session.scope.owner == scope.owner]
        if len(owned) >= self.max_sessions:
            expired = [sid for sid in owned if self._sessions[sid].expires <= now]
            for session_id in expired or owned[: len(owned) - self.max_sessions + 1]:
                del self._sessions[session_id]
        session_id = secrets.token_urlsafe(24)
        self._sessions[session_id] = _Session(scope, now + self.session_ttl_secs)
        return f"{session_id}.{self._sign(session_id)}"

    def _live_session_id(self, value: str | None) -> str | None:
        """The id of a live, correctly signed session cookie."""
        if not value or "." not in value:
            return None
        session_id, _, signature = value.rpartition(".")
        if not hmac.compare_digest(_digest(signature), _digest(self._sign(session_id))):
            return None
        if (session := self._sessions.get(session_id)) is not None and session.expires <= self._clock():
            del self._sessions[session_id]
            return None
        return None if session is None else session_id

    def scope_for_cookie(self, value: str | None) -> Scope | None:
        """The scope of a live, correctly signed session cookie."""
        session_id = self._live_session_id(value)
        return None if session_id is None else self._sessions[session_id].scope

    def close_session(self, value: str | None) -> None:
        """End the session of a cookie value (logout)."""
        session_id = self._live_session_id(value)
        if session_id is not None:
            del self._sessions[session_id]

    def csrf_token(self, request: Request) -> str:
        """The CSRF token of the request's session ("" when it is not authenticated by a session cookie)."""
        cookie = None if _bearer(request) is not None else request.cookies.get(SESSION_COOKIE)
        session_id = self._live_session_id(cookie)
        return "" if session_id is None else self._sign(f"csrf:{session_id}")

    def scope(self, request: Request) -> Scope | None:
        """The scope of a request: its bearer token, else its session cookie."""
        token, cookie = _bearer(request), request.cookies.get(SESSION_COOKIE)
        return self.scope_for_cookie(cookie) if token is None else self.scope_for_token(token)

    @staticmethod
    def behind_tls(request: Request) -> bool:
        """Whether the browser reached the console over TLS."""
        return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"

    def set_cookie(self, response: Response, request: Request, scope: Scope) -> None:
        """Attach a new session cookie for ``scope`` to ``response``."""
        value, ttl, secure = self.open_session(scope), int(self.session_ttl_secs), self.behind_tls(request)
        response.set_cookie(SESSION_COOKIE, value, max_age=ttl, httponly=True, samesite="strict", secure=secure,
                            path="/")


def _check_origin(request: Request, access: ConsoleAccess) -> None:
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site.lower() not in _OWN_FETCH_SITES:
            raise HTTPException(status_code=403, detail=f"cross-origin request refused (Sec-Fetch-Site: {site})")
        return
    origin, scheme = request.headers.get("origin"), "https" if access.behind_tls(request) else request.url.scheme
    if origin is not None and origin.rstrip("/") != f"{scheme}://{request.headers.get('host', '')}":
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
    """The form of an unsafe request (reviews, logout) that passed every cross-site check (else ``HTTPException``).

    ``SameSite=Strict`` does not stop another port or subdomain of the same site, so the request must also come from the
    console's origin, carry only a form-encoded body (at most :data:`MAX_FORM_BYTES`) and, when a session cookie
    authenticates it, the session's token in ``csrf_token``.
    """
    _check_origin(request, access)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind != FORM_TYPE:
        raise HTTPException(status_code=415, detail=f"the console accepts only {FORM_TYPE} bodies, not {kind}")
    if not kind and request.headers.get("content-length", "0") not in ("", "0"):
        raise HTTPException(status_code=415, detail=f"a request body needs Content-Type: {FORM_TYPE}")
    form = parse_qs((await _read_body(request)).decode("utf-8", "replace")) if kind else {}
    expected = access.csrf_token(request)
    if expected and not hmac.compare_digest(form.get(CSRF_FIELD, [""])[0].encode(), expected.encode()):
        raise HTTPException(status_code=403, detail="missing or wrong CSRF token; reload the page and try again")
    return form
