"""One-line descriptions of validation errors that name each field and its problem."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["describe_validation_error"]


def describe_validation_error(error: ValidationError) -> str:
    """Describe every problem as ``field 'a.b[0].c': message``, joined by ``; ``."""
    parts = []
    for item in error.errors():
        location = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in item["loc"])
        location = location.replace(".[", "[") or "(top level)"
        parts.append(f"field '{location}': {item['msg']}")
    return "; ".join(parts)
