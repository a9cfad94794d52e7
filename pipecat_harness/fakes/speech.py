"""How long synthesized speech lasts: the layout the simulated voice and the TTS fake share."""

from __future__ import annotations

import re

__all__ = ["PUNCTUATION_PAUSE", "speech_duration"]

#: Pause after a word ending in this punctuation, in seconds.
PUNCTUATION_PAUSE = {".": 0.35, "?": 0.35, "!": 0.35, ",": 0.15, ";": 0.2, ":": 0.2}


def speech_duration(text: str, words_per_minute: float) -> list[tuple[str, float, float]]:
    """Lay out ``text`` as ``(word, start, end)`` offsets at the given speaking rate.

    Each word takes time proportional to its length (average word = 60/wpm s), and punctuation after a word adds a
    pause.
    """
    words = text.split()
    if not words:
        return []
    seconds_per_char = 60.0 / words_per_minute / 5.0
    layout = []
    t = 0.0
    for word in words:
        letters = len(re.sub(r"[^\w]", "", word)) or 1
        duration = max(0.12, letters * seconds_per_char + 0.05)
        layout.append((word, t, t + duration))
        t += duration + PUNCTUATION_PAUSE.get(word[-1], 0.0)
    return layout
