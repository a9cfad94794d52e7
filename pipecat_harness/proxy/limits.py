"""How much one request to the proxy may carry, and the checks that enforce it.

A platform sends the whole conversation with every turn, so a normal call
grows by a few hundred characters per turn; anything far beyond that is an
attack or a bug, and it must be refused before it costs the event loop
anything. Every refusal names the setting that was exceeded.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pipecat_harness.proxy.requests import RequestError

__all__ = [
    "CALL_ID_PATTERN",
    "OFF_LOOP_BYTES",
    "ProxyLimits",
    "check_call_id",
    "check_depth",
    "decode_json",
    "off_loop_if_large",
]

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
        max_json_containers: Most arrays and objects in one body (413 beyond; braces inside
            strings count too, so it is set well above what ``max_messages`` needs).
    """

    max_body_bytes: int = 1_000_000
    max_messages: int = 1_000
    max_total_chars: int = 200_000
    max_call_id_chars: int = 128
    max_json_depth: int = 64
    max_json_containers: int = 20_000

    def check_shape(self, raw: bytes) -> int:
        """Refuse, before parsing, a body that cannot be within the limits (byte counts run at C speed).

        Every message carries a ``"role"`` key, and every array or object
        starts with ``[`` or ``{``; counting them bounds the work a parse
        would do, so a 10,000-turn body costs a millisecond, not a parse.

        Returns:
            The count of ``[`` and ``{`` bytes: at least as many as the body has arrays and objects,
            so at least as deep as they nest.

        Raises:
            RequestError: 413 naming ``max_messages`` or ``max_json_containers``.
        """
        roles = raw.count(b'"role"')
        if roles > self.max_messages:
            raise RequestError(
                413,
                f"request has {roles} messages or more; the limit is {self.max_messages} (proxy.max_messages)",
                "too_many_messages",
            )
        containers = raw.count(b"{") + raw.count(b"[")
        if containers > self.max_json_containers:
            raise RequestError(
                413,
                f"request has up to {containers} JSON arrays and objects; the limit is {self.max_json_containers} "
                "(proxy.max_json_containers)",
                "too_many_containers",
            )
        return containers

    def check_messages(self, messages: Sequence[Mapping[str, Any]], where: str = "messages") -> None:
        """Refuse too many messages or too much text.

        Raises:
            RequestError: 413 naming ``max_messages`` or ``max_total_chars``.
        """
        if len(messages) > self.max_messages:
            raise RequestError(
                413,
                f"{where} has {len(messages)} messages; the limit is {self.max_messages} (proxy.max_messages)",
                "too_many_messages",
            )
        total = 0
        for message in messages:
            total += _chars(message.get("content"))
            if total > self.max_total_chars:
                raise RequestError(
                    413,
                    f"{where} carries more than {self.max_total_chars} characters of content (proxy.max_total_chars)",
                    "too_much_text",
                )


def _chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return 0


def check_call_id(call_id: str, limits: ProxyLimits) -> str:
    """Return ``call_id`` if it has the expected format and length.

    Raises:
        RequestError: 400 naming the problem.
    """
    if len(call_id) > limits.max_call_id_chars:
        raise RequestError(
            400,
            f"call id is {len(call_id)} characters; the limit is {limits.max_call_id_chars} (proxy.max_call_id_chars)",
            "invalid_call_id",
        )
    if not CALL_ID_PATTERN.fullmatch(call_id):
        raise RequestError(
            400,
            "call id may contain only letters, digits and . _ : - (and must start with a letter or digit)",
            "invalid_call_id",
        )
    return call_id


def check_depth(value: Any, limit: int) -> None:
    """Refuse arrays and objects nested deeper than ``limit`` (iteratively: no recursion to exhaust).

    Raises:
        RequestError: 400 naming ``max_json_depth``.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise RequestError(
                400, f"request JSON is nested deeper than {limit} levels (proxy.max_json_depth)", "too_deep"
            )
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values() if isinstance(child, dict | list))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))


def decode_json(raw: bytes | str, limits: ProxyLimits) -> Any:
    """Decode a JSON body or frame within the depth limit, refusing lone surrogates.

    Raises:
        RequestError: 400 for empty, malformed, too deep, or invalid-Unicode input.
    """
    if not raw.strip():
        raise RequestError(400, "request body is empty; expected a JSON object", "empty_body")
    containers = limits.check_shape(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise RequestError(
            400,
            f"request JSON is nested deeper than {limits.max_json_depth} levels (proxy.max_json_depth)",
            "too_deep",
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"request body is not valid JSON: {exc}", "malformed_json") from exc
    if containers > limits.max_json_depth:  # fewer arrays and objects than the limit cannot nest deeper than it
        check_depth(value, limits.max_json_depth)
    encoded = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _SURROGATE_ESCAPE.search(encoded):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RequestError(
                400,
                "request JSON contains a lone UTF-16 surrogate (\\ud800-\\udfff); it is not valid Unicode",
                "invalid_unicode",
            ) from exc
    return value


async def off_loop_if_large(parse: Callable[[bytes, ProxyLimits], T], raw: bytes, limits: ProxyLimits) -> T:
    """``parse(raw, limits)``, in a worker thread when ``raw`` is large.

    A normal turn is a few kilobytes and is parsed in place (a thread hop
    would cost more than the parse); a body near the limit takes tens of
    milliseconds of pure Python, which must not stall the other calls on
    this worker's event loop.
    """
    if len(raw) <= OFF_LOOP_BYTES:
        return parse(raw, limits)
    return await asyncio.to_thread(parse, raw, limits)
