"""Canonical JSON of tool arguments, so equal requests compare and hash equal.

Two requests that differ only in key order, whitespace or number spelling
(``45`` vs ``45.0``) are the same request. Booleans stay distinct from numbers,
and strings are compared after Unicode NFC normalisation.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["CanonicalizationError", "canonical_json", "request_hash"]


# Built once: json.dumps with options builds a new encoder per call, a measurable
# share of the gate's per-call cost.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class CanonicalizationError(ValueError):
    """The arguments contain a value with no canonical JSON form."""


def _path(parts: tuple[str | int, ...]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "arguments"


def _normalise(value: Any, parts: tuple[str | int, ...]) -> Any:
    # Commonest types first, and the path to a value is only spelled out for an
    # error: this runs on every node of every tool call's arguments.
    kind = type(value)
    if kind is str:
        return unicodedata.normalize("NFC", value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is dict or isinstance(value, Mapping):
        normalised: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalizationError(f"{_path(parts)}: key {key!r} is not a string")
            normalised[unicodedata.normalize("NFC", key)] = _normalise(item, (*parts, key))
        return normalised
    if isinstance(value, float | Decimal):
        number = float(value)
        if not math.isfinite(number):
            raise CanonicalizationError(f"{_path(parts)}: {value!r} is not a finite number")
        # 45.0 and 45 are the same amount; -0.0 is zero.
        if number.is_integer() and abs(number) < 2**53:
            return int(number)
        return number
    if isinstance(value, bool | int | str):  # subclasses (an IntEnum, a str subclass)
        return _normalise(bool(value) if isinstance(value, bool) else
                          (int(value) if isinstance(value, int) else str(value)), parts)
    if isinstance(value, list | tuple):
        return [_normalise(item, (*parts, index)) for index, item in enumerate(value)]
    raise CanonicalizationError(f"{_path(parts)}: {type(value).__name__} is not a JSON value")


def canonical_json(arguments: Any) -> str:
    """Return the canonical JSON text of ``arguments``.

    Keys are sorted, separators carry no whitespace, integral floats are written
    as integers and strings are NFC-normalised.

    Raises:
        CanonicalizationError: A value is not JSON (a set, NaN, a non-string key...).
    """
    return _ENCODER.encode(_normalise(arguments, ()))


def request_hash(name: str, arguments: Any) -> str:
    """Return the SHA-256 hex digest identifying a request (tool name plus canonical arguments)."""
    return hashlib.sha256(f"{name}\n{canonical_json(arguments)}".encode()).hexdigest()
