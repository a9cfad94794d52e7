"""Finding and removing directives in a message list, by line prefix.

A directive line is one that *starts with* the marker (after leading
whitespace). A base prompt that merely mentions the marker mid-line is not a
directive and is kept intact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["is_directive_line", "strip_directive_text", "strip_directives", "user_turns"]

_INSTRUCTION_ROLES = {"system", "developer"}


def _is_mapping(value: Any) -> bool:
    # A parsed body's messages are dicts: the exact-type test spares the ABC check (several times slower).
    return type(value) is dict or isinstance(value, Mapping)


def is_directive_line(line: str, marker: str) -> bool:
    """Whether ``line`` is a directive line."""
    return line.lstrip().startswith(marker)


def strip_directive_text(text: str, marker: str) -> str:
    """Remove directive lines from ``text``; other lines are kept as they are."""
    return "\n".join(line for line in text.split("\n") if not is_directive_line(line, marker)).strip("\n")


def _strip_content(content: Any, marker: str) -> tuple[Any, bool]:
    if isinstance(content, str):
        stripped = strip_directive_text(content, marker)
        return stripped, stripped != content.strip("\n")
    if isinstance(content, list):
        parts, changed = [], False
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                text = strip_directive_text(part["text"], marker)
                if text != part["text"].strip("\n"):
                    changed = True
                if text.strip():
                    parts.append({**part, "text": text})
                continue
            parts.append(part)
        return parts, changed
    return content, False


def _is_empty(content: Any) -> bool:
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return not content
    return content is None


def strip_directives(messages: Sequence[Any], marker: str) -> tuple[list[Any], int]:
    """Remove directive lines from system and developer messages.

    A message left empty is dropped; messages of other roles and
    provider-specific message objects are kept untouched.

    Returns:
        The new message list and how many messages were changed or dropped.
    """
    result: list[Any] = []
    touched = 0
    for message in messages:
        if not _is_mapping(message) or message.get("role") not in _INSTRUCTION_ROLES:
            result.append(message)
            continue
        content, changed = _strip_content(message.get("content"), marker)
        if not changed:
            result.append(message)
            continue
        touched += 1
        if not _is_empty(content):
            result.append({**message, "content": content})
    return result, touched


def user_turns(messages: Sequence[Any]) -> list[str]:
    """The text of every user message, oldest first (empty ones skipped)."""
    turns = []
    for message in messages:
        if not _is_mapping(message) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(
                str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
            )
        if isinstance(content, str) and content.strip():
            turns.append(content.strip())
    return turns
