"""Who may call the proxy: the shared secrets Vapi and Retell send, checked in constant time.

Vapi: ``Authorization: Bearer`` or ``X-Vapi-Secret``, and on its webhook also ``x-signature`` (hex HMAC-SHA256 of
``"{x-timestamp}.{body}"``). Retell's socket handshake carries no signature, so its secret is a path segment
(``/llm-websocket/<secret>/{call_id}``) or a bearer header; its webhooks carry ``x-retell-signature: v=<ms>,d=<hex
HMAC-SHA256(api key, body + ms)>``. Signatures must be fresh. Every configured secret is compared (through a
SHA-256 digest, so timing depends on neither match nor length), and a failure never says which part was wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["UNAUTHORIZED_MESSAGE", "ProxyAuth", "matches_any", "retell_signature", "vapi_hmac_signature"]

UNAUTHORIZED_MESSAGE = "authentication required"

_RETELL_SIGNATURE = re.compile(r"^v=(\d{1,16}),d=([0-9a-fA-F]{64})$")
_HEX_DIGEST = re.compile(r"^[0-9a-fA-F]{64}$")


def _digest(value: str | bytes) -> bytes:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return hashlib.sha256(raw).digest()


def matches_any(given: str | None, secrets: Sequence[str]) -> bool:
    """Whether ``given`` equals one of ``secrets``, comparing every one in constant time."""
    if given is None:
        return False
    probe = _digest(given)
    return any([hmac.compare_digest(probe, _digest(secret)) for secret in secrets])  # every one compared


def vapi_hmac_signature(secret: str, timestamp: str, body: bytes) -> str:
    """Vapi's default HMAC credential signature: hex HMAC-SHA256 of ``"{timestamp}.{body}"``."""
    return hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def retell_signature(api_key: str, body: bytes, timestamp_ms: int) -> str:
    """The ``x-retell-signature`` value Retell sends for ``body`` at ``timestamp_ms``."""
    digest = hmac.new(api_key.encode(), body + str(timestamp_ms).encode(), hashlib.sha256).hexdigest()
    return f"v={timestamp_ms},d={digest}"


def _bearer(headers: Mapping[str, str]) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _plain_credential(headers: Mapping[str, str], keys: Sequence[str]) -> bool:
    return matches_any(headers.get("x-vapi-secret"), keys) | matches_any(_bearer(headers), keys)


@dataclass(frozen=True)
class ProxyAuth:
    """The proxy's credentials.

    Parameters:
        secrets: Accepted on the chat-completions route and the Retell socket.
        webhook_secrets: Accepted on ``/webhook/vapi`` (plain, bearer or HMAC key); empty means ``secrets``.
        retell_api_keys: Retell API keys that sign Retell webhooks.
        tolerance_secs: Largest clock difference accepted on a signed request.
        clock: Wall-clock source (injectable for tests).
    """

    secrets: tuple[str, ...] = ()
    webhook_secrets: tuple[str, ...] = ()
    retell_api_keys: tuple[str, ...] = ()
    tolerance_secs: float = 300.0
    clock: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self) -> None:
        for name in ("secrets", "webhook_secrets", "retell_api_keys"):
            values = tuple(getattr(self, name))
            if any(not isinstance(v, str) or not v for v in values):
                raise ValueError(f"proxy {name} must be non-empty strings")
            object.__setattr__(self, name, values)

    @property
    def enabled(self) -> bool:
        """Whether any credential is configured (no credential: every request is let in)."""
        return bool(self.secrets or self.webhook_secrets or self.retell_api_keys)

    def chat_allowed(self, headers: Mapping[str, str]) -> bool:
        """``POST /chat/completions``: bearer key or ``X-Vapi-Secret``."""
        return not self.enabled or _plain_credential(headers, self.secrets)

    def vapi_webhook_allowed(self, headers: Mapping[str, str], body: bytes) -> bool:
        """``POST /webhook/vapi``: ``X-Vapi-Secret``, bearer, or a fresh HMAC signature over the exact body."""
        keys = self.webhook_secrets or self.secrets
        return not self.enabled or _plain_credential(headers, keys) | self._vapi_hmac_ok(headers, body, keys)

    def vapi_webhook_may_pass(self, headers: Mapping[str, str]) -> bool:
        """Before the body is read: a valid plain credential, or a well-formed, fresh HMAC signature header."""
        if not self.enabled:
            return True
        signature = headers.get("x-signature", "").removeprefix("sha256=")
        signed = _HEX_DIGEST.match(signature) is not None and self._fresh(headers.get("x-timestamp"))
        return _plain_credential(headers, self.webhook_secrets or self.secrets) | signed

    def retell_webhook_may_pass(self, headers: Mapping[str, str]) -> bool:
        """Before the body is read: a well-formed, fresh ``x-retell-signature`` (checked against the body later)."""
        match = _RETELL_SIGNATURE.match(headers.get("x-retell-signature", ""))
        fresh = match is not None and self._fresh(match.group(1), milliseconds=True)
        return not self.enabled or bool(self.retell_api_keys and fresh)

    def _fresh(self, stamp: str | None, *, milliseconds: bool = False) -> bool:
        """Whether a signature's timestamp is within the tolerance (Vapi's: seconds, or ms from 13 digits on)."""
        if not stamp or not stamp.isdigit() or len(stamp) > 16:
            return False
        seconds = int(stamp) / 1000 if milliseconds or len(stamp) >= 13 else int(stamp)
        return abs(self.clock() - seconds) <= self.tolerance_secs

    def _vapi_hmac_ok(self, headers: Mapping[str, str], body: bytes, keys: Sequence[str]) -> bool:
        signature = headers.get("x-signature")
        stamp = headers.get("x-timestamp")
        if not signature or not stamp or not self._fresh(stamp):
            return False
        given = signature.removeprefix("sha256=").lower()
        return matches_any(given, [vapi_hmac_signature(key, stamp, body) for key in keys])

    def retell_socket_allowed(self, path_secret: str | None, headers: Mapping[str, str]) -> bool:
        """The Retell socket: the URL's secret segment or a bearer header."""
        return not self.enabled or matches_any(path_secret, self.secrets) | matches_any(_bearer(headers), self.secrets)

    def retell_webhook_allowed(self, headers: Mapping[str, str], body: bytes) -> bool:
        """``POST /webhook/retell``: a fresh ``x-retell-signature`` by one of the Retell API keys."""
        if not self.enabled:
            return True
        match = _RETELL_SIGNATURE.match(headers.get("x-retell-signature", ""))
        if match is None or not self._fresh(match.group(1), milliseconds=True):
            return False
        stamp = int(match.group(1))
        return matches_any(match.group(0).lower(), [retell_signature(key, body, stamp) for key in self.retell_api_keys])
