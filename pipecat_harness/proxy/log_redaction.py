"""Credentials never reach a log line: uvicorn's records and loguru's messages are redacted before they are written.

A socket handshake's path keeps only ``llm-websocket`` and the call id (the Retell secret is a path segment, and
a near miss is nearly the secret); credential-looking query values and every configured secret are replaced.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["REDACTED", "RefusedHandshakeNoise", "SecretRedactor", "install_loguru_redaction", "redact",
           "redact_socket_path", "uvicorn_log_config"]

REDACTED = "<redacted>"

_CREDENTIAL_QUERY = re.compile(r"([?&][^=&#\s\"]*(?:token|secret|key|sig|auth|pass)[^=&#\s\"]*=)[^&#\s\"]*", re.I)
_SOCKET_KEPT = frozenset({"", "llm-websocket"})
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "x-vapi-secret", "x-signature", "x-retell-signature"})
_HEADER_LINES = frozenset({"< %s: %s", "> %s: %s"})  # the websockets library's handshake lines at DEBUG


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credential query values and every one of ``secrets`` replaced."""
    if "=" in text:
        text = _CREDENTIAL_QUERY.sub(lambda m: m.group(1) + REDACTED, text)
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redact_socket_path(path: str) -> str:
    """A WebSocket handshake's path with its query and every segment but ``llm-websocket`` and the last replaced."""
    path, query, _ = path.partition("?")
    *head, last = path.split("/")
    kept = "/".join(s if s in _SOCKET_KEPT else REDACTED for s in head) + "/" + last
    return kept + (f"?{REDACTED}" if query else "")


def _scrub_scope(value: object) -> object:
    """An ASGI scope (logged at TRACE, its headers already left out) without its query or socket path."""
    if not isinstance(value, dict) or value.get("type") not in ("http", "websocket"):
        return value
    scope = dict(value)
    if scope.get("query_string"):
        scope["query_string"] = REDACTED.encode()
    if scope["type"] == "websocket":
        scope["path"] = redact_socket_path(str(scope.get("path", "")))
        scope["raw_path"] = scope["path"].encode()
    return scope


class SecretRedactor(logging.Filter):
    """A logging filter that redacts a record's message, arguments and traceback text (it drops nothing).

    Args:
        secrets: Values that must never be written.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place; always keep it (withholding its text if it cannot be redacted)."""
        try:
            self._redact(record)
        except Exception:  # a log line must never break the request that writes it
            record.msg, record.args, record.exc_info, record.exc_text = "(log line withheld)", (), None, None
        return True

    def _redact(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else None
        if record.name == "uvicorn.access" and args is not None:  # its formatter reads the arguments themselves
            record.args = tuple(redact(a, self.secrets) if isinstance(a, str) else a for a in args)
        else:
            template = str(record.msg)
            if args and ("WebSocket" in template or template.startswith("< ")):  # a handshake's request line
                args = tuple(redact_socket_path(a) if isinstance(a, str) and a.startswith("/") else a for a in args)
            if args and len(args) == 2 and template in _HEADER_LINES and str(args[0]).lower() in _CREDENTIAL_HEADERS:
                args = (args[0], REDACTED)
            if args:
                record.args = tuple(_scrub_scope(a) for a in args)
            try:
                message = record.getMessage()
            except (TypeError, ValueError):
                message = str(record.msg)
            record.msg, record.args = redact(message, self.secrets), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)


class RefusedHandshakeNoise(logging.Filter):
    """Drops the two extra lines uvicorn writes for each WebSocket refused with an HTTP status.

    The refusal is already one line. uvicorn repeats it (``connection rejected``) and, never taking a denial
    response as the end of the handshake, reports a false ``ASGI callable returned without completing
    handshake.`` at ERROR (Kludex/uvicorn pull request 3138); every socket route here accepts or denies.
    """

    _DROPPED = frozenset({"ASGI callable returned without completing handshake.", "connection rejected (%d %s)"})

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but the two above."""
        return str(record.msg) not in self._DROPPED


def uvicorn_log_config(secrets: Iterable[str] = ()) -> dict[str, Any]:
    """Uvicorn's default logging configuration with :class:`SecretRedactor` (and the refused-socket filter)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {
        "redact": {"()": f"{__name__}.SecretRedactor", "secrets": list(secrets)},
        "refused": {"()": f"{__name__}.RefusedHandshakeNoise"},
    }
    for handler in config["handlers"].values():
        handler["filters"] = ["refused", "redact"]
    return config


def install_loguru_redaction(secrets: Iterable[str] = ()) -> None:
    """Redact every loguru message of this process."""
    from loguru import logger

    kept = tuple(s for s in secrets if s)

    def patch(record: Any) -> None:
        record["message"] = redact(record["message"], kept)

    logger.configure(patcher=patch)
