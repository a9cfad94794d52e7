"""Reading configuration-like files with errors that name the file, the field and the problem.

Scenarios, configs, checklists, constraint lists and evaluation rules share one YAML (or JSON) reader, so every bad
file is reported the same way: one sentence that says what would fix it. It refuses what would make parsing slow or
crash: a file above :data:`MAX_FILE_BYTES` (by its size, unread), nesting deeper than :data:`MAX_DEPTH`, and YAML
aliases that expand past :data:`MAX_NODES` values.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_NODES", "describe_validation_error", "is_sensitive", "load_mapping_file"]

#: Largest file the reader parses; configuration-like files are kilobytes.
MAX_FILE_BYTES = 4 * 1024 * 1024
#: Deepest nesting of mappings and lists accepted.
MAX_DEPTH = 64
#: Most values (after YAML alias expansion) accepted in one file.
MAX_NODES = 200_000

# Fixes for the pydantic error types a hand-written file most often hits.
_HINTS = {"bool_parsing": "use true or false", "bool_type": "use true or false", "int_parsing": "use a whole number",
          "float_parsing": "use a number", "missing": "add it", "extra_forbidden": "remove it or correct its spelling",
          "string_pattern_mismatch": "use letters, digits and the characters the pattern allows"}


def _location(loc: tuple[int | str, ...]) -> str:
    location = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc)
    return location.replace(".[", "[") or "(top level)"


def _known_fields(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> list[str]:
    # The field names allowed at the parent of the unknown key at ``loc``, walking nested models.
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = _model_in(field.annotation)
    return list(getattr(current, "model_fields", {}) or [])


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_model_in, getattr(annotation, "__args__", ()) or ())), None)


_SENSITIVE_NAMES = ("url", "secret", "token", "key", "password", "dsn")


def is_sensitive(location: tuple[int | str, ...], value: Any) -> bool:
    """Whether a value must not be repeated in a message (a secret, or a URL that may carry a password)."""
    name = str(location[-1]).lower() if location else ""
    return any(part in name for part in _SENSITIVE_NAMES) or "://" in str(value)


def describe_validation_error(error: ValidationError, *, model: type[BaseModel] | None = None) -> str:
    """Describe every problem as ``field 'a.b[0].c': message (fix)``, joined by ``; ``.

    Given the validated ``model``, an unknown key gets the closest known field name suggested.
    """
    parts = []
    for item in error.errors():
        location = _location(item["loc"])
        message = item["msg"]
        given = item.get("input")
        scalar = isinstance(given, (str, int, float, bool)) and item["type"] not in {"missing", "extra_forbidden"}
        if scalar and not is_sensitive(item["loc"], given):
            shown = repr(given)
            message += f", got {shown}" if len(shown) <= 60 else f", got {shown[:57]}...'"
        hint = _HINTS.get(item["type"])
        if item["type"] == "extra_forbidden" and item["loc"]:
            known = _known_fields(model, item["loc"])
            close = difflib.get_close_matches(str(item["loc"][-1]), known, n=1)
            if close:
                hint = f"did you mean '{close[0]}'?"
            elif known:
                hint = f"known fields here: {', '.join(known)}"
        parts.append(f"field '{location}': {message}" + (f" ({hint})" if hint else ""))
    return "; ".join(parts)


def _check_shape(value: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH and alias bombs, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            too_many = f"holds more than {MAX_NODES} values (YAML aliases expand to that many)"
            raise ValueError(f"{too_many}; write the values out or split the file")
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise ValueError(f"nests deeper than {MAX_DEPTH} levels; flatten it")
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))


def load_mapping_file(path: str | Path, *, what: str, error: type[Exception] = ValueError) -> dict[str, Any]:
    """Read a YAML file (JSON when it ends in ``.json``) that must hold a mapping (empty for an empty file).

    Raises:
        error: The file (``what``, for the message, which starts with the path) is unreadable, too large, not UTF-8,
            not parseable, too deeply nested, or not a mapping.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise error(f"{path}: is a directory, not a {what} file; give the path of a .yaml file")
        if size > MAX_FILE_BYTES:
            limit = f"at most {MAX_FILE_BYTES // (1024 * 1024)} MB"
            raise error(f"{path}: {size / 1e6:.1f} MB is too large for a {what} ({limit}); remove the oversized value")
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}; check the path") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise error(f"{path}: {what} is not UTF-8 text ({byte}); save it as UTF-8") from exc
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise error(f"{path}: not valid YAML: {exc.problem or exc.context}{where}") from exc
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise error(f"{path}: {what} nests deeper than {MAX_DEPTH} levels; flatten it") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise error(f"{path}: a {what} must be a mapping of field names to values, got {type(raw).__name__}")
    try:
        _check_shape(raw)
    except ValueError as exc:
        raise error(f"{path}: {what} {exc}") from exc
    return raw
