"""How much one request to the proxy may carry, and the checks that enforce it.

A call grows by a few hundred characters a turn; far more is an attack or a bug, refused before it costs the
event loop anything, naming the setting exceeded.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pipecat_harness.proxy.requests import RequestError, parse_json_body

__all__ = ["CALL_ID_PATTERN", "OFF_LOOP_BYTES", "ProxyLimits", "check_call_id", "check_depth", "decode_json",
           "off_loop_if_large"]

T = TypeVar("T")

#: Bodies larger than this are parsed and checked in a worker thread, not on the event loop.
OFF_LOOP_BYTES = 64 * 1024

#: Call ids as Vapi (UUIDs) and Retell (hex strings) issue them, plus the separators people use in tests.
CALL_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")

# Any \uD800-\uDFFF escape; paired ones (emoji) are legal, so a hit is only a reason to look closer.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


@dataclass(frozen=True)
class ProxyLimits:
    """Bounds on one request.

    Parameters:
        max_body_bytes: Largest request body or socket frame (413 beyond).
        max_messages: Most messages in one request (413 beyond).
        max_total_chars: Most characters of message content in one request (413 beyond).
        max_call_id_chars: Longest call id (400 beyond).
        max_json_depth: Deepest nesting of arrays and objects (400 beyond).
        max_json_containers: Most arrays and objects in one body (413 beyond; braces inside strings count too).
    """

    max_body_bytes: int = 1_000_000
    max_messages: int = 1_000
    max_total_chars: int = 200_000
    max_call_id_chars: int = 128
    max_json_depth: int = 64
    max_json_containers: int = 20_000

    def check_shape(self, raw: bytes) -> int:
        """Refuse, before parsing, a body that cannot be within the limits (413 naming the setting).

        Counting ``"role"``, ``[`` and ``{`` runs at C speed; the returned count of ``[`` and ``{`` is at least the
        body's arrays and objects, so at least their depth.
        """
        roles = raw.count(b'"role"')
        if roles > self.max_messages:
            raise self._beyond(f"request has {roles} messages or more", "max_messages", "too_many_messages")
        containers = raw.count(b"{") + raw.count(b"[")
        if containers > self.max_json_containers:
            subject = f"request has up to {containers} JSON arrays and objects"
            raise self._beyond(subject, "max_json_containers", "too_many_containers")
        return containers

    def check_messages(self, messages: Sequence[Mapping[str, Any]], where: str = "messages") -> None:
        """Refuse too many messages or too much text (413 naming ``max_messages`` or ``max_total_chars``)."""
        if len(messages) > self.max_messages:
            raise self._beyond(f"{where} has {len(messages)} messages", "max_messages", "too_many_messages")
        if sum(_chars(message.get("content")) for message in messages) > self.max_total_chars:
            raise RequestError(413, f"{where} carries more than {self.max_total_chars} characters of content "
                               "(proxy.max_total_chars)", "too_much_text")

    def _beyond(self, subject: str, setting: str, code: str, status: int = 413) -> RequestError:
        return RequestError(status, f"{subject}; the limit is {getattr(self, setting)} (proxy.{setting})", code)


def _chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return 0


def check_call_id(call_id: str, limits: ProxyLimits) -> str:
    """Return ``call_id`` if it has the expected format and length (else a 400 naming the problem)."""
    if len(call_id) > limits.max_call_id_chars:
        raise limits._beyond(f"call id is {len(call_id)} characters", "max_call_id_chars", "invalid_call_id", 400)
    if not CALL_ID_PATTERN.fullmatch(call_id):
        message = "call id may contain only letters, digits and . _ : - (and must start with a letter or digit)"
        raise RequestError(400, message, "invalid_call_id")
    return call_id


def _too_deep(limit: int) -> RequestError:
    return RequestError(400, f"request JSON is nested deeper than {limit} levels (proxy.max_json_depth)", "too_deep")


def check_depth(value: Any, limit: int) -> None:
    """Refuse arrays and objects nested deeper than ``limit`` (a 400; iteratively, no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise _too_deep(limit)
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def decode_json(raw: bytes | str, limits: ProxyLimits) -> Any:
    """Decode a JSON body or frame within the limits (a 400 when empty, malformed, too deep or not Unicode)."""
    encoded = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    containers = limits.check_shape(encoded)
    try:
        value = parse_json_body(raw)
    except RecursionError as exc:
        raise _too_deep(limits.max_json_depth) from exc
    if containers > limits.max_json_depth:  # fewer arrays and objects than the limit cannot nest deeper than it
        check_depth(value, limits.max_json_depth)
    if _SURROGATE_ESCAPE.search(encoded):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            message = "request JSON contains a lone UTF-16 surrogate (\\ud800-\\udfff); it is not valid Unicode"
            raise RequestError(400, message, "invalid_unicode") from exc
    return value


async def off_loop_if_large(parse: Callable[[bytes, ProxyLimits], T], raw: bytes, limits: ProxyLimits) -> T:
    """``parse(raw, limits)``, in a worker thread when ``raw`` is large.

    A few-kilobyte turn is parsed in place (a thread hop costs more); one near the limit takes tens of
    milliseconds, which must not stall the other calls on the event loop.
    """
    if len(raw) <= OFF_LOOP_BYTES:
        return parse(raw, limits)
    return await asyncio.to_thread(parse, raw, limits)
