"""Who may use the operator console, and which tenants' rows they see.

A token belongs to one tenant (or a few); an optional admin token sees every tenant. A browser presents its token once
(``?token=``), then a session cookie holding only a random session id and its signature: ``HttpOnly``,
``SameSite=Strict``, and ``Secure`` over TLS (direct, or ``X-Forwarded-Proto: https``). Tokens are compared in constant
time, all of them every time. A token holds at most ``max_sessions`` sessions (a new one closes that token's oldest); a
session's CSRF token is derived from its id and the console's key, so it lives and dies with the session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import Response

__all__ = ["SESSION_COOKIE", "ConsoleAccess", "Scope"]

SESSION_COOKIE = "harness_console_session"


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


def _owner(token: str) -> str:
    """A name for a token that does not reveal it."""
    return hashlib.sha256(b"owner:" + token.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class ConsoleAccess:
    """Tokens (``tenant_tokens``: token -> its tenant or tenants; ``admin_tokens``), their scopes, and browser sessions.

    Raises:
        ValueError: No token at all, an empty token, or a tenant token without a tenant.
    """

    def __init__(
        self,
        tenant_tokens: Mapping[str, str | Iterable[str]] | None = None,
        admin_tokens: Iterable[str] = (),
        *,
        session_ttl_secs: float = 8 * 3600.0,
        max_sessions: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._tokens: list[tuple[bytes, Scope]] = []
        for token, tenants in (tenant_tokens or {}).items():
            names = frozenset([tenants] if isinstance(tenants, str) else tenants)
            if not token or not names or not all(names):
                raise ValueError("every console tenant token must be non-empty and name at least one tenant")
            self._tokens.append((_digest(token), Scope(names, _owner(token))))
        for token in admin_tokens:
            if not token:
                raise ValueError("the console admin token must not be empty")
            self._tokens.append((_digest(token), Scope(None, _owner(token))))
        if not self._tokens:
            raise ValueError("the console needs a token: an admin token or at least one tenant token")
        self._key = secrets.token_bytes(32)
        self._sessions: dict[str, _Session] = {}  # oldest first
        self.session_ttl_secs = session_ttl_secs
        self.max_sessions = max_sessions
        self._clock = clock

    def scope_for_token(self, token: str | None) -> Scope | None:
        """The scope of ``token``, or ``None`` when it is not a console token."""
        if not token:
            return None
        probe = _digest(token)
        found = [scope for digest, scope in self._tokens if hmac.compare_digest(probe, digest)]  # every one compared
        return found[0] if found else None

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
        session = self._sessions.get(session_id)
        if session is not None and session.expires <= self._clock():
            del self._sessions[session_id]
            session = None
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
        session_id = (
            None if _bearer(request) is not None else self._live_session_id(request.cookies.get(SESSION_COOKIE))
        )
        if session_id is None:
            return ""
        return hmac.new(self._key, b"csrf:" + session_id.encode(), hashlib.sha256).hexdigest()

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
        response.set_cookie(
            SESSION_COOKIE, value, max_age=ttl, httponly=True, samesite="strict", secure=secure, path="/"
        )
