"""Pacing a reply's text the way a model streams it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from pipecat_harness.fakes.chat import ChatReply

__all__ = ["text_pieces"]


async def text_pieces(reply: ChatReply) -> AsyncIterator[str]:
    """Yield the reply's text word by word (with trailing whitespace), ``token_secs`` apart."""
    for index, piece in enumerate(re.findall(r"\S+\s*", reply.text)):
        if index and reply.token_secs:
            await asyncio.sleep(reply.token_secs)
        yield piece
