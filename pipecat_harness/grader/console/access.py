"""Who may use the operator console, and which tenants' rows they see.

A token belongs to one tenant (or a few); an optional admin token sees every tenant. A browser presents its token once
(``?token=``) and from then on a session cookie that holds only a random session id and its signature, never the token:
``HttpOnly`` (scripts cannot read it), ``SameSite=Strict`` (other sites cannot make the browser send it) and ``Secure``
when the console is reached over TLS (directly or behind a proxy that says so in ``X-Forwarded-Proto``). Tokens are
compared in constant time, every one of them every time. Each token holds at most ``max_sessions`` sessions: opening one
more closes that token's oldest, never another token's. A session's CSRF token (:meth:`ConsoleAccess.csrf_token`) is
derived from its id and the console's key, so it lives and dies with the session.
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
    """Tokens, their tenant scopes, and browser sessions.

    Args:
        tenant_tokens: Token -> tenant (or tenants) it may see.
        admin_tokens: Tokens that see every tenant.
        session_ttl_secs: Life of a browser session.
        max_sessions: Most sessions of one token (its oldest goes first).
        clock: Wall-clock source (injectable for tests).

    Raises:
        ValueError: No token at all, an empty token, or a tenant token without a tenant.
    """

    def __init__(self, tenant_tokens: Mapping[str, str | Iterable[str]] | None = None, admin_tokens: Iterable[str] = (),
                 *, session_ttl_secs: float = 8 * 3600.0, max_sessions: int = 100,
                 clock: Callable[[], float] = time.time) -> None:
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
        self._sessions: dict[str, _Session] = {}
        self._owned: dict[str, dict[str, None]] = {}  # owner -> its session ids, oldest first
        self.session_ttl_secs = session_ttl_secs
        self.max_sessions = max_sessions
        self._clock = clock

    def scope_for_token(self, token: str | None) -> Scope | None:
        """The scope of ``token``, or ``None`` when it is not a console token."""
        if not token:
            return None
        probe = _digest(token)
        found: Scope | None = None
        for digest, scope in self._tokens:
            if hmac.compare_digest(probe, digest) and found is None:
                found = scope
        return found

    def _sign(self, session_id: str) -> str:
        return hmac.new(self._key, session_id.encode(), hashlib.sha256).hexdigest()

    def open_session(self, scope: Scope) -> str:
        """Start a session for ``scope``; returns the cookie value (session id and signature).

        The token's expired sessions close first; at ``max_sessions`` its oldest live one does too.
        """
        now = self._clock()
        owned = self._owned.setdefault(scope.owner, {})
        if len(owned) >= self.max_sessions:
            expired = [s for s in owned if self._sessions[s].expires <= now]
            for session_id in expired or list(owned)[: len(owned) - self.max_sessions + 1]:
                self._drop(session_id)
        session_id = secrets.token_urlsafe(24)
        self._sessions[session_id] = _Session(scope, now + self.session_ttl_secs)
        self._owned.setdefault(scope.owner, {})[session_id] = None
        return f"{session_id}.{self._sign(session_id)}"

    def _drop(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            owned = self._owned.get(session.scope.owner, {})
            owned.pop(session_id, None)
            if not owned:
                self._owned.pop(session.scope.owner, None)

    def _live_session_id(self, value: str | None) -> str | None:
        """The id of a live, correctly signed session cookie."""
        if not value or "." not in value:
            return None
        session_id, _, signature = value.rpartition(".")
        if not hmac.compare_digest(_digest(signature), _digest(self._sign(session_id))):
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires <= self._clock():
            self._drop(session_id)
            return None
        return session_id

    def scope_for_cookie(self, value: str | None) -> Scope | None:
        """The scope of a live, correctly signed session cookie."""
        session_id = self._live_session_id(value)
        return None if session_id is None else self._sessions[session_id].scope

    def close_session(self, value: str | None) -> None:
        """End the session of a cookie value (logout)."""
        session_id = self._live_session_id(value)
        if session_id is not None:
            self._drop(session_id)

    def csrf_token(self, request: Request) -> str:
        """The CSRF token of the request's session ("" when it is not authenticated by a session cookie)."""
        if _bearer(request) is not None:
            return ""
        session_id = self._live_session_id(request.cookies.get(SESSION_COOKIE))
        if session_id is None:
            return ""
        return hmac.new(self._key, b"csrf:" + session_id.encode(), hashlib.sha256).hexdigest()

    def scope(self, request: Request) -> Scope | None:
        """The scope of a request: its bearer token, else its session cookie."""
        token = _bearer(request)
        if token is not None:
            return self.scope_for_token(token)
        return self.scope_for_cookie(request.cookies.get(SESSION_COOKIE))

    @staticmethod
    def behind_tls(request: Request) -> bool:
        """Whether the browser reached the console over TLS."""
        return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"

    def set_cookie(self, response: Response, request: Request, scope: Scope) -> None:
        """Attach a new session cookie for ``scope`` to ``response``."""
        response.set_cookie(SESSION_COOKIE, self.open_session(scope), max_age=int(self.session_ttl_secs), httponly=True,
                            samesite="strict", secure=self.behind_tls(request), path="/")
