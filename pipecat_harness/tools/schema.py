"""Validation of tool arguments against the JSON-Schema subset tool definitions use.

Supported keywords: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties`` (boolean or schema), ``items``, ``enum``, ``const``,
``minimum``/``maximum``, ``exclusiveMinimum``/``exclusiveMaximum``,
``minLength``/``maxLength``, ``minItems``/``maxItems``, ``pattern``. Unknown
keywords are ignored, as JSON Schema prescribes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["schema_of", "validate_arguments"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def _is_type(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    if name == "object":
        return isinstance(value, Mapping)
    return isinstance(value, _TYPES.get(name, (object,)))


def _check(value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    where = path or "arguments"
    wanted = schema.get("type")
    if wanted is not None:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        if not any(_is_type(value, n) for n in names):
            errors.append(f"{where}: expected {' or '.join(names)}, got {type(value).__name__}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: must be {schema['const']!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, ok, text in (
            ("minimum", lambda b: value >= b, ">="),
            ("maximum", lambda b: value <= b, "<="),
            ("exclusiveMinimum", lambda b: value > b, ">"),
            ("exclusiveMaximum", lambda b: value < b, "<"),
        ):
            if key in schema and not ok(schema[key]):
                errors.append(f"{where}: must be {text} {schema[key]}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{where}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            errors.append(f"{where}: does not match {schema['pattern']!r}")
    if isinstance(value, list | tuple):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        if isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                _check(item, schema["items"], f"{path}[{index}]", errors)
    if isinstance(value, Mapping):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                errors.append(f"{where}: missing required field '{key}'")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if key in properties:
                _check(item, properties[key], child, errors)
            elif extra is False:
                errors.append(f"{where}: unexpected field '{key}'")
            elif isinstance(extra, Mapping):
                _check(item, extra, child, errors)


def validate_arguments(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Return the problems of ``arguments`` against ``schema`` (empty when valid).

    Args:
        arguments: The parsed arguments object.
        schema: A JSON Schema of type ``object`` (a tool's ``parameters``).
    """
    errors: list[str] = []
    _check(arguments, schema, "", errors)
    return errors


def schema_of(tool: Any) -> dict[str, Any]:
    """Return the parameters schema of a tool definition.

    Accepts a Pipecat ``FunctionSchema`` (``properties``/``required``), an
    OpenAI tool (``{"type": "function", "function": {"parameters": ...}}``),
    an OpenAI function (``{"name", "parameters"}``) or a bare schema.
    """
    if hasattr(tool, "properties") and hasattr(tool, "required"):
        return {"type": "object", "properties": dict(tool.properties), "required": list(tool.required)}
    if isinstance(tool, Mapping):
        if isinstance(tool.get("function"), Mapping):
            tool = tool["function"]
        if isinstance(tool.get("parameters"), Mapping):
            return dict(tool["parameters"])
        return dict(tool)
    raise TypeError(f"cannot read a parameters schema from {type(tool).__name__}")
