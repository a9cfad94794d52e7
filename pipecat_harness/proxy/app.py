"""The proxy's FastAPI application: Vapi chat completions, the Vapi and Retell webhooks, the Retell socket.

Chat completions answer as SSE (or one JSON answer); the Retell socket is ``/llm-websocket/{secret}/{call_id}``
(without secrets also ``/{call_id}``). With a :class:`~pipecat_harness.proxy.auth.ProxyAuth`, every route but
``/health`` answers 401 without a valid credential (a socket before it opens, a webhook before its body is
read), before anything reaches the state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from pipecat_harness.proxy.auth import UNAUTHORIZED_MESSAGE, ProxyAuth
from pipecat_harness.proxy.limits import ProxyLimits, check_call_id, decode_json, off_loop_if_large
from pipecat_harness.proxy.requests import (
    ChatTurnRequest,
    ConversationUpdate,
    RequestError,
    RetellEvent,
    ended_call_id,
    parse_chat_request,
    parse_conversation_update,
    parse_retell_event,
)
from pipecat_harness.proxy.retell import RetellSession
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.sse import DONE_EVENT, ChunkWriter
from pipecat_harness.proxy.upstream import UpstreamRequest

__all__ = ["DEFAULT_MAX_BODY_BYTES", "EventStreamResponse", "ProxyApp", "create_app", "read_body"]

DEFAULT_MAX_BODY_BYTES = 1_000_000

_SOCKET_REASONS = {400: "invalid call id", 401: UNAUTHORIZED_MESSAGE}

T = TypeVar("T")


def _unauthorized() -> JSONResponse:
    """The 401 answer; the same whichever credential was missing or wrong."""
    body = {"error": {"message": UNAUTHORIZED_MESSAGE, "type": "invalid_request_error", "code": "unauthorized"}}
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})


async def _deny_socket(websocket: WebSocket, status: int) -> None:
    """Refuse a WebSocket handshake with an HTTP ``status`` (a 1008 close where the server cannot send one)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        body = {"error": {"message": _SOCKET_REASONS.get(status, "refused"), "code": str(status)}}
        await websocket.send_denial_response(JSONResponse(body, status_code=status))
        return
    await websocket.close(code=1008)


async def read_body(request: Request, limit: int) -> bytes:
    """Read the request body: a 413 beyond ``limit`` bytes, a 400 when the client left before its end."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"request body of {declared} bytes exceeds the {limit}-byte limit", "body_too_large")
    body = bytearray()
    try:
        async for piece in request.stream():
            body.extend(piece)
            if len(body) > limit:
                raise RequestError(413, f"request body exceeds the {limit}-byte limit", "body_too_large")
    except ClientDisconnect:
        raise RequestError(400, "the client disconnected before the request body was complete", "aborted") from None
    return bytes(body)


class EventStreamResponse(StreamingResponse):
    """A streamed response whose client-disconnect watch is one plain task.

    Starlette's anyio task group per response is measurable at hundreds of streams; here one task waits for
    ``http.disconnect`` and cancels the stream (closing the upstream request with it).
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Stream the body; stop when the client goes away."""
        streaming = asyncio.current_task()
        disconnected = False

        async def watch() -> None:
            nonlocal disconnected
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected = True
            if streaming is not None:
                streaming.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await self._stream_from_first_chunk(send)
        except asyncio.CancelledError:
            if not disconnected or streaming is None:
                raise
            streaming.uncancel()
        finally:
            watcher.cancel()
        if self.background is not None:
            await self.background()

    async def _stream_from_first_chunk(self, send: Any) -> None:
        """Like ``stream_response``, the status line held until the first chunk (no socket write before it)."""
        chunks = aiter(self.body_iterator)
        first: bytes | memoryview | str = b""
        with contextlib.suppress(StopAsyncIteration):
            first = await anext(chunks)
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if await self._send_body(send, first):
            return
        async for chunk in chunks:
            if await self._send_body(send, chunk):
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_body(self, send: Any, chunk: bytes | memoryview | str) -> bool:
        """Send one chunk; one ending with ``data: [DONE]`` ends the body in the same write."""
        if not isinstance(chunk, bytes | memoryview):
            chunk = chunk.encode(self.charset)
        last = chunk[-len(DONE_EVENT) :] == DONE_EVENT
        await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        return last


class _ChatEventStream(EventStreamResponse):
    """One turn's SSE answer, written as the service's chunks come.

    The role event goes out with the first chunk (nothing is written before the model request is sent), the
    finish event with ``data: [DONE]`` in the last write.
    """

    def __init__(self, service: ProxyService, request: UpstreamRequest, call_id: str) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(self._events(service, request, call_id), media_type="text/event-stream", headers=headers)

    @staticmethod
    async def _events(service: ProxyService, request: UpstreamRequest, call_id: str) -> AsyncIterator[bytes]:
        writer = ChunkWriter(request.model)
        opening = writer.role()
        last = b""
        async for chunk in service.stream(request, call_id=call_id):
            events, opening = opening, b""
            if chunk.text:
                events += writer.text(chunk.text)
            if chunk.tool_calls:
                events += writer.tool_calls(chunk.tool_calls)
            if chunk.finish_reason is not None:
                last += events + writer.finish(chunk.finish_reason)
            elif events:
                yield events
        yield opening + last + DONE_EVENT  # the base class ends the body with it


def _chat_turn(raw: bytes, limits: ProxyLimits) -> ChatTurnRequest:
    turn = parse_chat_request(decode_json(raw, limits))
    check_call_id(turn.call_id, limits)
    limits.check_messages(turn.messages)
    return turn


def _conversation_update(raw: bytes, limits: ProxyLimits) -> ConversationUpdate | str | None:
    """The update of a ``conversation-update``, the call id of an ``end-of-call-report``, else ``None``."""
    body = decode_json(raw, limits)
    update = parse_conversation_update(body)
    if update is not None:
        check_call_id(update.call_id, limits)
        limits.check_messages(update.messages, "conversation")
        return update
    ended = ended_call_id(body)
    return None if ended is None else check_call_id(ended, limits)


def _retell_event(raw: bytes, limits: ProxyLimits) -> RetellEvent:
    event = parse_retell_event(decode_json(raw, limits))
    check_call_id(event.call_id, limits)
    return event


def _error(exc: RequestError) -> JSONResponse:
    return JSONResponse(exc.to_body(), status_code=exc.status)


async def _collect(service: ProxyService, request: UpstreamRequest, call_id: str) -> dict[str, Any]:
    """The whole answer as one ``chat.completion`` (the service releases each tool call whole, in order)."""
    writer = ChunkWriter(request.model)
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    finish = "stop"
    async for chunk in service.stream(request, call_id=call_id):
        text.append(chunk.text)
        calls.extend({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                     for call in chunk.tool_calls)
        if chunk.finish_reason is not None:
            finish = chunk.finish_reason
    return writer.completion("".join(text), calls, finish)


ChatHandler = Callable[[Request], Awaitable[Response]]


class ProxyApp(FastAPI):
    """The FastAPI application, with chat completions (the voice path) served ahead of its middleware and router.

    Their layers around ``send`` cost per streamed chunk and do nothing the handler, which answers its own
    errors, does not do itself.
    """

    chat_handler: ChatHandler | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve ``POST .../chat/completions`` directly, anything else through FastAPI."""
        handler = self.chat_handler
        is_chat = scope["type"] == "http" and scope["method"] == "POST" and scope["path"].endswith("/chat/completions")
        if handler is not None and is_chat:
            scope["app"] = self
            response = await handler(Request(scope, receive))
            await response(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(service: ProxyService, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, retell_greeting: str = "",
               auth: ProxyAuth | None = None, limits: ProxyLimits | None = None) -> FastAPI:
    """Build the proxy application around ``service``.

    Args:
        service: Prompt building and upstream streaming.
        max_body_bytes: Largest accepted request body (when ``limits`` is not given).
        retell_greeting: What the agent says when a Retell call opens ("" waits for the caller).
        auth: Credentials every route checks (``None``: open, for loopback development).
        limits: Bounds on every request.
    """
    auth = auth or ProxyAuth()
    limits = limits or ProxyLimits(max_body_bytes=max_body_bytes)
    app = ProxyApp(title="pipecat-harness proxy", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    app.state.auth = auth
    app.state.limits = limits

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "upstream": service.upstream.name}

    async def chat_completions(request: Request) -> Response:
        if not auth.chat_allowed(request.headers):
            return _unauthorized()
        try:
            turn = await off_loop_if_large(_chat_turn, await read_body(request, limits.max_body_bytes), limits)
        except RequestError as exc:
            return _error(exc)
        prepared = await service.prepare(turn.call_id, turn.messages)
        if not turn.stream:
            return JSONResponse(await _collect(service, prepared.request, turn.call_id))
        return _ChatEventStream(service, prepared.request, turn.call_id)

    app.chat_handler = chat_completions
    app.add_api_route("/chat/completions", chat_completions, methods=["POST"])
    app.add_api_route("/{prefix:path}/chat/completions", chat_completions, methods=["POST"])

    async def signed(request: Request, may_pass: Callable[[Mapping[str, str]], bool],
                     allowed: Callable[[Mapping[str, str], bytes], bool],
                     parse: Callable[[bytes, ProxyLimits], T]) -> T | Response:
        """A webhook's parsed body, or the response refusing it (not signed as configured, unreadable or invalid)."""
        if not may_pass(request.headers):
            return _unauthorized()  # before a byte of the body is read
        try:
            raw = await read_body(request, limits.max_body_bytes)
            if not allowed(request.headers, raw):
                return _unauthorized()
            return await off_loop_if_large(parse, raw, limits)
        except RequestError as exc:
            return _error(exc)

    @app.post("/webhook/vapi")
    async def vapi_webhook(request: Request) -> Response:
        update = await signed(request, auth.vapi_webhook_may_pass, auth.vapi_webhook_allowed, _conversation_update)
        if isinstance(update, Response):
            return update
        if update is None:
            return JSONResponse({"status": "ignored"})
        if isinstance(update, str):
            await service.forget(update)  # the call is over: its state need not wait for the TTL
            return JSONResponse({"status": "forgotten"})
        directive = await service.observe(update.call_id, update.messages)
        return JSONResponse({"status": "updated", "next": directive.kind if directive else None})

    @app.post("/webhook/retell")
    async def retell_webhook(request: Request) -> Response:
        event = await signed(request, auth.retell_webhook_may_pass, auth.retell_webhook_allowed, _retell_event)
        if isinstance(event, Response):
            return event
        if event.event == "call_ended":
            await service.forget(event.call_id)
        return Response(status_code=204)

    async def retell(websocket: WebSocket, call_id: str, secret: str | None = None) -> None:
        if not auth.retell_socket_allowed(secret, websocket.headers):
            await _deny_socket(websocket, 401)
            return
        try:
            check_call_id(call_id, limits)
        except RequestError:
            await _deny_socket(websocket, 400)
            return
        await RetellSession(websocket, call_id, service, greeting=retell_greeting, limits=limits).run()

    app.add_api_websocket_route("/llm-websocket/{secret}/{call_id}", retell)
    app.add_api_websocket_route("/llm-websocket/{call_id}", retell)
    app.add_api_websocket_route("/{call_id}", retell)

    @app.exception_handler(json.JSONDecodeError)
    async def bad_json(_: Request, exc: json.JSONDecodeError) -> JSONResponse:
        return _error(RequestError(400, f"request body is not valid JSON: {exc}", "malformed_json"))

    return app
