"""Who may use the operator console, and which tenants' rows they see.

A token belongs to one tenant (or a few); an optional admin token sees every
tenant. A browser presents its token once (``?token=``) and from then on a
session cookie that holds only a random session id and its signature, never
the token: ``HttpOnly`` (scripts cannot read it), ``SameSite=Strict`` (other
sites cannot make the browser send it) and ``Secure`` when the console is
reached over TLS (directly or behind a proxy that says so in
``X-Forwarded-Proto``). Tokens are compared in constant time, every one of
them every time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

__all__ = ["SESSION_COOKIE", "ConsoleAccess", "Scope"]

SESSION_COOKIE = "harness_console_session"


@dataclass(frozen=True)
class Scope:
    """The tenants one credential may see (``None``: every tenant)."""

    tenants: frozenset[str] | None

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


class ConsoleAccess:
    """Tokens, their tenant scopes, and browser sessions.

    Args:
        tenant_tokens: Token -> tenant (or tenants) it may see.
        admin_tokens: Tokens that see every tenant.
        session_ttl_secs: Life of a browser session.
        max_sessions: Most sessions kept (the oldest go first).
        clock: Wall-clock source (injectable for tests).

    Raises:
        ValueError: No token at all, an empty token, or a tenant token without a tenant.
    """

    def __init__(
        self,
        tenant_tokens: Mapping[str, str | Iterable[str]] | None = None,
        admin_tokens: Iterable[str] = (),
        *,
        session_ttl_secs: float = 8 * 3600.0,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._tokens: list[tuple[bytes, Scope]] = []
        for token, tenants in (tenant_tokens or {}).items():
            names = frozenset([tenants] if isinstance(tenants, str) else tenants)
            if not token or not names or not all(names):
                raise ValueError("every console tenant token must be non-empty and name at least one tenant")
            self._tokens.append((_digest(token), Scope(names)))
        for token in admin_tokens:
            if not token:
                raise ValueError("the console admin token must not be empty")
            self._tokens.append((_digest(token), Scope(None)))
        if not self._tokens:
            raise ValueError("the console needs a token: an admin token or at least one tenant token")
        self._key = secrets.token_bytes(32)
        self._sessions: dict[str, _Session] = {}
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
        """Start a session for ``scope``; returns the cookie value (session id and signature)."""
        now = self._clock()
        if len(self._sessions) >= self.max_sessions:
            for session_id in [s for s, v in self._sessions.items() if v.expires <= now] or list(self._sessions)[:1]:
                del self._sessions[session_id]
        session_id = secrets.token_urlsafe(24)
        self._sessions[session_id] = _Session(scope, now + self.session_ttl_secs)
        return f"{session_id}.{self._sign(session_id)}"

    def scope_for_cookie(self, value: str | None) -> Scope | None:
        """The scope of a live, correctly signed session cookie."""
        if not value or "." not in value:
            return None
        session_id, _, signature = value.rpartition(".")
        if not hmac.compare_digest(_digest(signature), _digest(self._sign(session_id))):
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires <= self._clock():
            del self._sessions[session_id]
            return None
        return session.scope

    def close_session(self, value: str | None) -> None:
        """End the session of a cookie value (logout)."""
        if value and self.scope_for_cookie(value) is not None:
            self._sessions.pop(value.rpartition(".")[0], None)

    def scope(self, request: Request) -> Scope | None:
        """The scope of a request: its bearer token, else its session cookie."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self.scope_for_token(token.strip())
        return self.scope_for_cookie(request.cookies.get(SESSION_COOKIE))

    @staticmethod
    def behind_tls(request: Request) -> bool:
        """Whether the browser reached the console over TLS."""
        return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"

    def set_cookie(self, response: Response, request: Request, scope: Scope) -> None:
        """Attach a new session cookie for ``scope`` to ``response``."""
        response.set_cookie(
            SESSION_COOKIE,
            self.open_session(scope),
            max_age=int(self.session_ttl_secs),
            httponly=True,
            samesite="strict",
            secure=self.behind_tls(request),
            path="/",
        )
