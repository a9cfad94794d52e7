"""Finding and removing directives by line prefix (a line that merely mentions the marker is kept)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["content_text", "is_directive_line", "strip_directive_text", "strip_directives", "user_turns"]

_INSTRUCTION_ROLES = {"system", "developer"}


def _is_mapping(value: Any) -> bool:
    # A parsed body's messages are dicts: the exact-type test spares the ABC check (several times slower).
    return type(value) is dict or isinstance(value, Mapping)


def content_text(content: Any, separator: str = " ") -> str:
    """A message content's text: a string as it is, a list's text parts joined, anything else ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return separator.join(str(p.get("text", "")) for p in content if _is_mapping(p) and p.get("type") == "text")
    return ""


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
    if not isinstance(content, list):
        return content, False
    parts, changed = [], False
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
            text = strip_directive_text(part["text"], marker)
            changed = changed or text != part["text"].strip("\n")
            if text.strip():
                parts.append({**part, "text": text})
        else:
            parts.append(part)
    return parts, changed


def strip_directives(messages: Sequence[Any], marker: str) -> tuple[list[Any], int]:
    """Remove directive lines from system and developer messages, dropping a message left empty.

    Other messages are kept untouched. Returns the new list and how many messages were changed or dropped.
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
        if content.strip() if isinstance(content, str) else content:  # (changed content is a string or a list)
            result.append({**message, "content": content})
    return result, touched


def user_turns(messages: Sequence[Any]) -> list[str]:
    """The text of every user message, oldest first (empty ones skipped)."""
    texts = (content_text(m.get("content")).strip() for m in messages if _is_mapping(m) and m.get("role") == "user")
    return [text for text in texts if text]
