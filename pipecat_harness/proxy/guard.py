"""The proxy's refusals: one 401 body for every failed credential, and refusing a socket before it opens."""

from __future__ import annotations

from fastapi import WebSocket
from fastapi.responses import JSONResponse

from pipecat_harness.proxy.auth import UNAUTHORIZED_MESSAGE

__all__ = ["deny_socket", "unauthorized"]

_SOCKET_REASONS = {400: "invalid call id", 401: UNAUTHORIZED_MESSAGE}


def unauthorized() -> JSONResponse:
    """The 401 answer; the same whichever credential was missing or wrong."""
    body = {"error": {"message": UNAUTHORIZED_MESSAGE, "type": "invalid_request_error", "code": "unauthorized"}}
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})


async def deny_socket(websocket: WebSocket, status: int) -> None:
    """Refuse a WebSocket handshake with an HTTP ``status`` (a 1008 close where the server cannot send one)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        body = {"error": {"message": _SOCKET_REASONS.get(status, "refused"), "code": str(status)}}
        await websocket.send_denial_response(JSONResponse(body, status_code=status))
        return
    await websocket.close(code=1008)
