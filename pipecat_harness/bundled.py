"""Data shipped in the package, addressed by name so that configs work from any directory.

Settings that take a file also take ``bundled:<name>`` (``constraints_path: bundled:retail`` reads the retail
constraint list inside the installed package); :func:`resolve_data_path` turns either form into a path.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import Literal

from pipecat_harness.errors import InputError

__all__ = ["BUNDLED_PREFIX", "DataKind", "bundled_names", "bundled_path", "resolve_data_path"]

#: Prefix of a bundled name in a setting that takes a file.
BUNDLED_PREFIX = "bundled:"

DataKind = Literal["constraint list", "checklist", "scenario", "labeled set", "recorded call"]

# Where each kind of bundled file lives in the package, and which files of that folder are of the kind.
_LOCATIONS: dict[str, tuple[str, str, str]] = {
    "constraint list": ("pipecat_harness.grader", "data", "[!l]*.yaml"),
    "labeled set": ("pipecat_harness.grader", "data", "labeled_*.yaml"),
    "checklist": ("pipecat_harness.checklist", "data", "*.yaml"),
    "scenario": ("pipecat_harness", "scenarios", "*.yaml"),
    "recorded call": ("pipecat_harness.replay", "data", "*.jsonl"),
}


def _folder(kind: str) -> Path:
    package, folder, _ = _LOCATIONS[kind]
    return Path(str(resources.files(package).joinpath(folder)))


def bundled_names(kind: DataKind) -> list[str]:
    """The names of the bundled files of a kind (``bundled_names("constraint list")`` → ``["detailing", ...]``)."""
    names = sorted(path.stem for path in _folder(kind).glob(_LOCATIONS[kind][2]))
    return [n for n in names if not (kind == "constraint list" and n.startswith("holdout_"))]


def bundled_path(kind: DataKind, name: str) -> Path:
    """The path of a bundled file (an :class:`InputError` listing the names when there is none of that name)."""
    name = name.removeprefix(BUNDLED_PREFIX)
    names = bundled_names(kind)
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{BUNDLED_PREFIX}{close[0]}'?" if close else f"choose one of {', '.join(names)}"
        raise InputError(f"no bundled {kind} named '{name}' ({hint})")
    suffix = _LOCATIONS[kind][2].rsplit(".", 1)[-1]
    return _folder(kind) / f"{name}.{suffix}"


def resolve_data_path(value: str | Path, kind: DataKind) -> Path:
    """A file path as given, or the bundled file a ``bundled:<name>`` value names."""
    return bundled_path(kind, str(value)) if str(value).startswith(BUNDLED_PREFIX) else Path(value)
