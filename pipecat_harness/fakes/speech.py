"""How synthesized speech and streamed text are paced: the layout the simulated voice and the fakes share."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from pipecat_harness.fakes.chat import ChatReply

__all__ = ["PUNCTUATION_PAUSE", "speech_duration", "text_pieces", "text_tokens"]

#: Pause after a word ending in this punctuation, in seconds.
PUNCTUATION_PAUSE = {".": 0.35, "?": 0.35, "!": 0.35, ",": 0.15, ";": 0.2, ":": 0.2}


def speech_duration(text: str, words_per_minute: float) -> list[tuple[str, float, float]]:
    """Lay out ``text`` as ``(word, start, end)``: time per letter (a word takes 60/wpm s), pauses after punctuation."""
    seconds_per_char = 60.0 / words_per_minute / 5.0
    layout = []
    t = 0.0
    for word in text.split():
        letters = len(re.sub(r"[^\w]", "", word)) or 1
        duration = max(0.12, letters * seconds_per_char + 0.05)
        layout.append((word, t, t + duration))
        t += duration + PUNCTUATION_PAUSE.get(word[-1], 0.0)
    return layout


def text_tokens(text: str) -> list[str]:
    """The streamed pieces of a reply: each word with the whitespace after it."""
    return re.findall(r"\S+\s*", text)


async def text_pieces(reply: ChatReply) -> AsyncIterator[str]:
    """Yield the reply's text word by word (with trailing whitespace), ``token_secs`` apart."""
    for index, piece in enumerate(text_tokens(reply.text)):
        if index and reply.token_secs:
            await asyncio.sleep(reply.token_secs)
        yield piece
