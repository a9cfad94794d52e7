"""Tool-call arguments: bounded streaming accumulation, parsing, validation, and server context.

Server context (tenant id, customer id) is never the model's to choose: arguments setting it are refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.tools.schema import validate_arguments

__all__ = ["DEFAULT_MAX_ARGUMENT_BYTES", "ArgumentAccumulator", "ArgumentError", "ArgumentNormalizer",
           "attach_server_context", "check_json_value", "normalize_arguments", "parse_arguments", "prepare_arguments"]

DEFAULT_MAX_ARGUMENT_BYTES = 16_384
#: Deepest nesting accepted in arguments (tool schemas need a handful of levels).
MAX_ARGUMENT_DEPTH = 32
#: Longest integer accepted, in digits (amounts and ids are far shorter).
MAX_INTEGER_DIGITS = 30

_SIZER = json.JSONEncoder(default=str)  # built once (json.dumps with options builds an encoder per call)

ArgumentNormalizer = Callable[[dict[str, Any]], Mapping[str, Any]]
"""Gives a tool's arguments their business-canonical form (an order id with its ``#``, say)."""


class ArgumentError(ValueError):
    """Arguments that cannot be forwarded; ``kind`` says why (``malformed_json``, ``too_large``, ``invalid``...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise ArgumentError("too_large", f"arguments are {size} bytes; the limit is {max_bytes}")


def parse_arguments(raw: Any, *, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES) -> dict[str, Any]:
    """Return a mapping, JSON text or UTF-8 bytes (``None``, blank: ``{}``) as a dict, or raise ``ArgumentError``."""
    if isinstance(raw, bytes | bytearray):
        _check_size(len(raw), max_bytes)
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArgumentError("malformed_json", f"arguments are not UTF-8: {exc.reason}") from exc
    if raw is None:
        return {}
    value = raw
    if isinstance(raw, str):
        _check_size(len(raw.encode("utf-8")), max_bytes)
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_int=_bounded_int)
        except json.JSONDecodeError as exc:
            reason = f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
            raise ArgumentError("malformed_json", reason) from exc
        except RecursionError as exc:
            raise ArgumentError("too_deep", f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels") from exc
    if not isinstance(value, dict | Mapping):
        raise ArgumentError("not_an_object", f"arguments must be a JSON object, got {_json_type(value)}")
    check_json_value(value)
    if not isinstance(raw, str):
        try:
            size = len(_SIZER.encode(value).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise ArgumentError("invalid", f"arguments are not JSON-serialisable: {exc}") from exc
        _check_size(size, max_bytes)
    return dict(value)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in pairs:
        if key in result:
            raise ArgumentError("duplicate_key", f"arguments repeat the key {key!r}; say each field once")
        result[key] = item
    return result


def _no_constant(name: str) -> Any:
    raise ArgumentError("invalid", f"arguments contain {name}, which is not a number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ArgumentError("invalid", f"arguments contain an integer of {len(text)} digits; too large")
    return int(text)


def check_json_value(value: Any) -> None:
    """Refuse what has no safe canonical JSON form, iteratively (hostile nesting cannot exhaust the stack).

    Too deep or long an integer, NaN or infinity, a lone surrogate, a non-string key or a non-JSON type.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            raise ArgumentError("too_deep", f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if item.bit_length() > MAX_INTEGER_DIGITS * 3.33:
                raise ArgumentError("invalid", "arguments contain an integer too large to be an amount or an id")
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ArgumentError("invalid", f"arguments contain {item!r}, which is not a finite number")
        elif isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict | Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ArgumentError("invalid", f"arguments contain the non-text key {key!r}")
                _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
        else:
            raise ArgumentError("invalid", f"arguments contain a {type(item).__name__}, which is not JSON")


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ArgumentError("invalid", "arguments contain a lone UTF-16 surrogate (broken text)") from exc


def _json_type(value: Any) -> str:
    for kinds, name in ((bool, "a boolean"), (int | float, "a number"), (str, "a string"), (list | tuple, "an array")):
        if isinstance(value, kinds):
            return name
    return "null" if value is None else type(value).__name__


def attach_server_context(arguments: Mapping[str, Any], context: Mapping[str, Any], *,
                          reserved: Iterable[str] = ()) -> dict[str, Any]:
    """Return ``arguments`` plus trusted ``context`` (``ArgumentError`` if the model set it or a ``reserved`` field)."""
    if not context and not reserved:
        return dict(arguments)
    if supplied := [key for key in sorted(set(context) | set(reserved)) if key in arguments]:
        names = ", ".join(repr(k) for k in supplied)
        raise ArgumentError("server_context", f"argument(s) {names} are set by the server, not by the model")
    return {**arguments, **context}


@dataclass
class _Buffer:
    name: str = ""
    parts: list[str] = field(default_factory=list)
    size: int = 0
    overflow: bool = False


class ArgumentAccumulator:
    """Accumulates streamed argument fragments per tool-call id, each call finalised once, within ``max_bytes``.

    A call beyond the limit stops buffering (memory stays bounded) and fails when finished.
    """

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES, max_calls: int = 64) -> None:
        self.max_bytes = max_bytes
        self.max_calls = max_calls
        self._buffers: dict[str, _Buffer] = {}
        self._finished: set[str] = set()

    @property
    def pending(self) -> list[str]:
        """Ids of calls started but not finished, in arrival order."""
        return list(self._buffers)

    def _refuse_finalised(self, call_id: str) -> None:
        if call_id in self._finished:
            raise ArgumentError("already_finalised", f"tool call {call_id!r} was already finalised")

    def add(self, call_id: str, fragment: str = "", *, name: str | None = None) -> None:
        """Append the next piece of a call's arguments (``name``: the tool, when the chunk carries it)."""
        self._refuse_finalised(call_id)
        buffer = self._buffers.get(call_id)
        if buffer is None:
            if len(self._buffers) >= self.max_calls:
                raise ArgumentError("too_large", f"more than {self.max_calls} tool calls open at once")
            buffer = self._buffers[call_id] = _Buffer()
        if name:
            buffer.name = name
        if buffer.overflow or not fragment:
            return
        buffer.size += len(fragment.encode("utf-8"))
        if buffer.size > self.max_bytes:
            buffer.overflow = True
            buffer.parts.clear()
        else:
            buffer.parts.append(fragment)

    def name(self, call_id: str) -> str:
        """Return the tool name seen for a pending call (empty when none yet)."""
        return self._buffers.get(call_id, _Buffer()).name

    def finish(self, call_id: str) -> dict[str, Any]:
        """Finalise a call and return its parsed arguments (``ArgumentError`` as :func:`parse_arguments`, or twice)."""
        self._refuse_finalised(call_id)
        buffer = self._buffers.pop(call_id, _Buffer())
        self._finished.add(call_id)
        if buffer.overflow:
            reason = f"arguments exceeded {self.max_bytes} bytes (at least {buffer.size} received)"
            raise ArgumentError("too_large", reason)
        return parse_arguments("".join(buffer.parts), max_bytes=self.max_bytes)

    def discard(self, call_id: str) -> None:
        """Drop a call's buffer without parsing (the stream was abandoned)."""
        self._buffers.pop(call_id, None)
        self._finished.add(call_id)


def normalize_arguments(normalizer: ArgumentNormalizer, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a tool's normalizer to a copy of its arguments (``ArgumentError`` if it fails or returns no mapping)."""
    try:
        normalized = normalizer(dict(arguments))
    except Exception as exc:  # a normalizer rejecting the arguments is a bad request, not a crash
        raise ArgumentError("invalid", f"invalid arguments: {exc}") from exc
    if not isinstance(normalized, Mapping):
        raise ArgumentError("invalid", "invalid arguments: the normalizer did not return an object")
    return dict(normalized)


def prepare_arguments(raw: Any, *, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
                      trusted: Mapping[str, Any] | None = None, reserved: Iterable[str] = (),
                      schema: Mapping[str, Any] | None = None,
                      normalizer: ArgumentNormalizer | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Parse (bounded), refuse model-set server context, validate, normalize and attach the trusted context.

    Returns the final arguments and, when the normalizer changed them, the normalized model arguments.
    """
    model_arguments = parse_arguments(raw, max_bytes=max_bytes)
    context = dict(trusted or {})
    attach_server_context(model_arguments, context, reserved=reserved)  # refuses model-supplied context first
    if schema is not None and (problems := validate_arguments(model_arguments, schema)):
        raise ArgumentError("invalid", "invalid arguments: " + "; ".join(problems))
    normalized = model_arguments if normalizer is None else normalize_arguments(normalizer, model_arguments)
    changed = normalized if normalizer is not None and normalized != model_arguments else None
    return attach_server_context(normalized, context, reserved=reserved), changed
