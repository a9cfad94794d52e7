"""The Retell custom-LLM WebSocket protocol, served per call.

Only the newest ``response_id`` is answered (an answer in progress is abandoned once a newer request arrives);
``update_only`` updates the state, ``ping_pong`` is echoed. A frame the protocol does not allow is logged and
skipped; one far below the newest (beyond :data:`RESPONSE_ID_WINDOW`) starts a new count, so none can silence
the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from fastapi import WebSocket, WebSocketDisconnect
from loguru import logger

from pipecat_harness.proxy.limits import ProxyLimits, decode_json
from pipecat_harness.proxy.requests import RequestError
from pipecat_harness.proxy.service import ProxyService

__all__ = ["MAX_RESPONSE_ID", "RESPONSE_ID_WINDOW", "RetellSession", "transcript_to_messages"]

#: Largest ``response_id`` accepted (a 32-bit signed counter: far beyond any call's requests).
MAX_RESPONSE_ID = 2**31 - 1
#: How far a ``response_id`` may be from the newest and still be a late frame (below) or the next one (above).
RESPONSE_ID_WINDOW = 64


_ROLES = {"agent": "assistant", "user": "user"}


def _response(response_id: int, content: str, complete: bool, **extra: Any) -> dict[str, Any]:
    event = {"response_type": "response", "response_id": response_id, "content": content}
    return {**event, "content_complete": complete, **extra}


def transcript_to_messages(transcript: Any) -> list[dict[str, Any]]:
    """Retell ``transcript`` utterances as OpenAI messages (unknown roles skipped)."""
    if not isinstance(transcript, Sequence) or isinstance(transcript, str):
        return []
    return [{"role": _ROLES[str(item.get("role"))], "content": str(item.get("content") or "")}
            for item in transcript if isinstance(item, Mapping) and str(item.get("role")) in _ROLES]


class RetellSession:
    """One Retell call's socket.

    Args:
        websocket: The accepted-on-run WebSocket.
        call_id: From the URL path.
        service: Prompt building and upstream streaming.
        greeting: First agent line ("" lets the caller speak first).
        limits: Bounds on each frame and its transcript.
    """

    def __init__(self, websocket: WebSocket, call_id: str, service: ProxyService, *, greeting: str = "",
                 limits: ProxyLimits | None = None) -> None:
        self.websocket = websocket
        self.call_id = call_id
        self.service = service
        self.greeting = greeting
        self.limits = limits or ProxyLimits()
        self.latest_response_id = -1
        self._responder: asyncio.Task[None] | None = None
        self._observer: asyncio.Task[Any] | None = None
        self._send_lock = asyncio.Lock()

    async def _send(self, payload: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.websocket.send_text(json.dumps(payload))

    async def run(self) -> None:
        """Serve the socket until Retell closes it."""
        await self.websocket.accept()
        await self._send({"response_type": "config", "config": {"auto_reconnect": True, "call_details": False}})
        await self._send(_response(0, self.greeting, True))
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                event = self._decode(message)
                if event is not None:
                    await self._handle(event)
        except WebSocketDisconnect:
            pass
        finally:
            for task in (self._responder, self._observer):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

    def _decode(self, message: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The frame's event object, or ``None`` (logged) for a frame the protocol does not allow."""
        text = message.get("text")
        if not isinstance(text, str):
            self._ignore("a binary frame (the protocol sends text)")
        elif len(text) > self.limits.max_body_bytes:
            self._ignore(f"a {len(text)}-character frame (proxy.max_body_bytes)")
        else:
            try:
                event = decode_json(text, self.limits)
            except RequestError as exc:
                self._ignore(f"a frame: {exc.message[:200]}")
                return None
            if isinstance(event, Mapping):
                return event
            self._ignore("a frame that is not a JSON object")
        return None

    def _ignore(self, what: str) -> None:
        logger.warning(f"retell call {self.call_id}: ignoring {what}")

    def _transcript(self, event: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The event's transcript as messages, or ``None`` (logged) when it exceeds the limits."""
        messages = transcript_to_messages(event.get("transcript"))
        try:
            self.limits.check_messages(messages, "transcript")
        except RequestError as exc:
            self._ignore(f"an event: {exc.message}")
            return None
        return messages

    async def _handle(self, event: Mapping[str, Any]) -> None:
        kind = event.get("interaction_type")
        if kind == "ping_pong":
            stamp = event.get("timestamp")
            stamp = stamp if isinstance(stamp, int | float) else None
            await self._send({"response_type": "ping_pong", "timestamp": stamp})
        elif kind == "update_only":
            messages = self._transcript(event)
            if messages is None:
                return
            while messages and messages[-1]["role"] == "user":
                messages.pop()  # the caller may still be speaking: analyse completed turns only
            if self._observer is not None:
                self._observer.cancel()
            self._observer = asyncio.create_task(self.service.observe(self.call_id, messages))
        elif kind in ("response_required", "reminder_required"):
            response_id = event.get("response_id")
            if not self._current(response_id):
                return
            messages = self._transcript(event)
            if messages is None:
                return
            self.latest_response_id = response_id
            if self._responder is not None:
                self._responder.cancel()
            self._responder = asyncio.create_task(self._respond(response_id, messages))
        elif kind != "call_details":
            logger.info(f"retell call {self.call_id}: ignoring interaction_type {kind!r}")

    def _current(self, response_id: object) -> TypeGuard[int]:
        """Whether a request's ``response_id`` is the newest (a late or impossible one is skipped)."""
        if type(response_id) is not int or not 0 <= response_id <= MAX_RESPONSE_ID:
            self._ignore(f"a response_id outside 0..{MAX_RESPONSE_ID}")
            return False
        gap = response_id - self.latest_response_id
        if self.latest_response_id > 0 and gap > RESPONSE_ID_WINDOW:
            self._ignore(f"response_id {response_id}, {gap} past the newest ({self.latest_response_id})")
            return False
        return not -RESPONSE_ID_WINDOW <= gap < 0  # a little below: late; far below: a new count

    async def _respond(self, response_id: int, messages: list[dict[str, Any]]) -> None:
        prepared = await self.service.prepare(self.call_id, messages)
        async for chunk in self.service.stream(prepared.request, call_id=self.call_id):
            if response_id != self.latest_response_id:
                return
            if chunk.text:
                await self._send(_response(response_id, chunk.text, False))
        if response_id != self.latest_response_id:
            return
        end_call = bool(prepared.directive is not None and prepared.directive.end_call)
        await self._send(_response(response_id, "", True, end_call=end_call))
