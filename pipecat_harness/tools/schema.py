"""Validation of tool arguments against the tool's JSON Schema (Draft 2020-12, ``jsonschema``).

A problem reads ``<field path>: <what is wrong>``, so the model knows which argument to fix; a schema that is not
valid JSON Schema refuses every call with one sentence saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from pipecat_harness.tools.canonical import field_path

__all__ = ["schema_of", "validate_arguments"]

#: Compiled validators by schema identity; each entry keeps its schema alive, so an id is never reused while cached.
_VALIDATORS: dict[int, tuple[Mapping[str, Any], Draft202012Validator | str]] = {}
_MAX_VALIDATORS = 256


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator | str:
    """The compiled validator of ``schema``, or the sentence saying why the schema is not valid."""
    if (cached := _VALIDATORS.get(id(schema))) is not None and cached[0] is schema:
        return cached[1]
    compiled: Draft202012Validator | str
    try:
        Draft202012Validator.check_schema(schema)
        compiled = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    except SchemaError as exc:
        compiled = f"the tool's parameters schema is not valid JSON Schema ({exc.message})"
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, compiled)
    return compiled


def validate_arguments(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Return the problems of ``arguments`` against an object ``schema`` (a tool's ``parameters``); empty if valid."""
    validator = _validator(schema)
    if isinstance(validator, str):
        return [validator]
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{field_path(error.absolute_path)}: {error.message}" for error in errors]


def schema_of(tool: Any) -> dict[str, Any]:
    """Return the parameters schema of a Pipecat ``FunctionSchema``, an OpenAI tool or function, or a bare schema."""
    if hasattr(tool, "properties") and hasattr(tool, "required"):
        return {"type": "object", "properties": dict(tool.properties), "required": list(tool.required)}
    if isinstance(tool, Mapping):
        if isinstance(tool.get("function"), Mapping):
            tool = tool["function"]
        return dict(tool["parameters"] if isinstance(tool.get("parameters"), Mapping) else tool)
    raise TypeError(f"cannot read a parameters schema from {type(tool).__name__}")
