"""Canonical JSON of tool arguments, so requests differing only in key order, whitespace or number spelling are one.

``45`` and ``45.0`` are equal; booleans stay distinct from numbers; strings are compared in Unicode NFC.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Iterable, Mapping
from decimal import Decimal
from json import JSONEncoder
from typing import Any

__all__ = ["CanonicalizationError", "canonical_json", "field_path", "request_hash"]

# Built once: json.dumps with options builds a new encoder per call, a measurable share of the gate's per-call cost.
_ENCODER = JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class CanonicalizationError(ValueError):
    """The arguments contain a value with no canonical JSON form."""


def field_path(parts: Iterable[str | int]) -> str:
    """Return ``order.items[2]`` for ``("order", "items", 2)`` (``arguments`` for the object itself)."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def _normalise(value: Any, parts: tuple[str | int, ...]) -> Any:
    # Commonest types first, and the path is only spelled out for an error: this runs on every node of every call.
    kind = type(value)
    if kind is str:
        return unicodedata.normalize("NFC", value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is dict or isinstance(value, Mapping):
        normalised: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalizationError(f"{field_path(parts)}: key {key!r} is not a string")
            normalised[unicodedata.normalize("NFC", key)] = _normalise(item, (*parts, key))
        return normalised
    if isinstance(value, float | Decimal):
        number = float(value)
        if not math.isfinite(number):
            raise CanonicalizationError(f"{field_path(parts)}: {value!r} is not a finite number")
        return int(number) if number.is_integer() and abs(number) < 2**53 else number  # 45.0 is 45; -0.0 is zero
    if isinstance(value, bool | int | str):  # subclasses (an IntEnum, a str subclass)
        base = bool if isinstance(value, bool) else int if isinstance(value, int) else str
        return _normalise(base(value), parts)
    if isinstance(value, list | tuple):
        return [_normalise(item, (*parts, index)) for index, item in enumerate(value)]
    raise CanonicalizationError(f"{field_path(parts)}: {type(value).__name__} is not a JSON value")


def canonical_json(arguments: Any) -> str:
    """Return the canonical JSON text (``CanonicalizationError`` for a set, NaN, a non-string key...)."""
    return _ENCODER.encode(_normalise(arguments, ()))


def request_hash(name: str, arguments: Any) -> str:
    """Return the SHA-256 hex digest identifying a request (tool name plus canonical arguments)."""
    return hashlib.sha256(f"{name}\n{canonical_json(arguments)}".encode()).hexdigest()
