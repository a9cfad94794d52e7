"""Playback receipts: marks sent after audio and echoed back by the far end once it played.

A mark's name carries the reply and its seconds of audio before the mark (``ph:3:2480``). Twilio echoes pending
marks after an interruption too, so receipts count only while a reply is still playing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MARK_PREFIX", "PlaybackMark", "format_mark", "parse_mark", "twilio_mark_message", "twilio_mark_name"]

#: Prefix of the harness's mark names (other marks a bot sends are ignored).
MARK_PREFIX = "ph:"


@dataclass(frozen=True)
class PlaybackMark:
    """A decoded mark: which reply, and seconds of its audio played once the mark is echoed."""

    reply_id: int
    played_secs: float


def format_mark(reply_id: int, played_secs: float) -> str:
    """Return the mark name for ``played_secs`` of reply ``reply_id``'s audio."""
    return f"{MARK_PREFIX}{reply_id}:{max(0, round(played_secs * 1000))}"


def parse_mark(name: str) -> PlaybackMark | None:
    """Decode a mark name made by :func:`format_mark`; ``None`` for any other name."""
    if not isinstance(name, str) or not name.startswith(MARK_PREFIX):
        return None
    reply, _, millis = name[len(MARK_PREFIX) :].partition(":")
    if not (reply.isdigit() and millis.isdigit()):
        return None
    return PlaybackMark(reply_id=int(reply), played_secs=int(millis) / 1000.0)


def twilio_mark_message(stream_sid: str, name: str) -> dict[str, Any]:
    """Return the Twilio media-stream message that asks Twilio to echo ``name`` after the audio sent so far."""
    return {"event": "mark", "streamSid": stream_sid, "mark": {"name": name}}


def twilio_mark_name(message: Any) -> str | None:
    """Return the mark name of an incoming Twilio ``mark`` event, or ``None`` for any other message."""
    mark = message.get("mark") if isinstance(message, dict) and message.get("event") == "mark" else None
    name = mark.get("name") if isinstance(mark, dict) else None
    return name if isinstance(name, str) else None
