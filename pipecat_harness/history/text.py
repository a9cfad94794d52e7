"""Text helpers for history correction: comparing replies word by word and filling the marker."""

from __future__ import annotations

from collections import defaultdict

from pipecat_harness.history.estimator import split_units

__all__ = ["MARKER_FIELDS", "format_marker", "normalized_words"]

#: Placeholders the marker text may use.
MARKER_FIELDS = ("heard", "tail", "unheard_words")
_TAIL_WORDS = 5


def normalized_words(text: str) -> list[str]:
    """Lower-cased spoken units of ``text`` without punctuation (words, or characters in unspaced scripts)."""
    return [w for u in split_units(text or "") if (w := "".join(c for c in u.text.lower() if c.isalnum()))]


def format_marker(template: str, heard: str, generated: str) -> str:
    """Fill the marker ``template`` from the ``heard`` prefix and the ``generated`` reply; unknown fields stay empty."""
    units = [u.text for u in split_units(heard)]
    unheard = max(0, len(normalized_words(generated)) - len(normalized_words(heard)))
    values = defaultdict(str, heard=heard.strip(), tail=" ".join(units[-_TAIL_WORDS:]), unheard_words=str(unheard))
    try:
        return template.format_map(values)
    except (ValueError, IndexError):  # a malformed template is used as plain text
        return template
