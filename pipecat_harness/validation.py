"""Reading configuration-like files with errors that name the file, the field and the problem.

Scenarios, harness configs, checklists, constraint lists and evaluation rules
are all YAML (or JSON) mappings validated by pydantic; they share one reader
so that every bad file is reported the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

__all__ = ["describe_validation_error", "load_mapping_file"]


def describe_validation_error(error: ValidationError) -> str:
    """Describe every problem as ``field 'a.b[0].c': message``, joined by ``; ``."""
    parts = []
    for item in error.errors():
        location = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in item["loc"])
        location = location.replace(".[", "[") or "(top level)"
        parts.append(f"field '{location}': {item['msg']}")
    return "; ".join(parts)


def load_mapping_file(path: str | Path, *, what: str, error: type[Exception] = ValueError) -> dict[str, Any]:
    """Read a YAML file (JSON when it ends in ``.json``) that must hold a mapping.

    Args:
        path: The file.
        what: What the file is, for messages (``"scenario"``, ``"config"``...).
        error: The exception type to raise.

    Returns:
        The mapping (empty for an empty file).

    Raises:
        error: The file is unreadable, not parseable, or not a mapping; the
            message starts with the path.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON: {exc.msg} (line {exc.lineno})") from exc
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise error(f"{path}: a {what} must be a mapping, got {type(raw).__name__}")
    return raw
