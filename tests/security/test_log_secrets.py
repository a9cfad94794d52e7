"""No credential in any log line, at any level: real proxy and console processes, logging everything they can.

Every server of this suite has its whole output checked for the credentials
it was given when it stops (:func:`tests.security.servers.serving`); here the
proxy logs at TRACE with the access log on, and is sent each credential where
a client would put it, and near misses of it where an attacker would.
"""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from pipecat_harness.proxy.auth import retell_signature
from tests.security.servers import serving

SECRET, WEBHOOK_SECRET, RETELL_KEY = "sock-secret-7f3a9c", "hook-secret-2b8e41", "retell-key-9d0c55"
ADMIN, ACME = "console-admin-4e1f", "console-acme-8a2d"
NEAR_MISSES = [SECRET[:-1], SECRET + "x", SECRET.upper()]
CREDENTIALS = (SECRET, WEBHOOK_SECRET, RETELL_KEY, ADMIN, ACME)


def _grep(log: str, *values: str) -> list[str]:
    return [value for value in values if value in log]


async def test_the_proxy_logs_no_credential_at_trace_level_with_the_access_log_on():
    env = {
        "PIPECAT_HARNESS_PROXY__SECRETS": json.dumps([SECRET]),
        "PIPECAT_HARNESS_PROXY__WEBHOOK_SECRETS": json.dumps([WEBHOOK_SECRET]),
        "PIPECAT_HARNESS_PROXY__RETELL_API_KEYS": json.dumps([RETELL_KEY]),
    }
    with serving(["proxy", "--log-level", "trace", "--access-log"], env) as url:
        ws = url.replace("http://", "ws://")
        async with websockets.connect(f"{ws}/llm-websocket/{SECRET}/call-a") as socket:
            assert json.loads(await socket.recv())["response_type"] == "config"
        guesses = [f"/llm-websocket/{g}/call-a" for g in NEAR_MISSES] + [
            f"/llm-websocket/{SECRET}", f"/{SECRET}/call-a", f"/{SECRET[:-1]}/call-a", f"/call-a?token={SECRET}",
        ]
        for path in guesses:
            with pytest.raises(InvalidStatus):
                async with websockets.connect(ws + path):
                    pass
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            chat = {"messages": [{"role": "user", "content": "Hi."}], "call": {"id": "log-call"}, "stream": False}
            assert (await client.post("/chat/completions", json=chat,
                                      headers={"Authorization": f"Bearer {SECRET}"})).status_code == 200
            assert (await client.post(f"/{SECRET}/chat/completions?key={SECRET}", json=chat)).status_code == 401
            update = {"message": {"type": "status-update", "call": {"id": "log-call"}}}
            assert (await client.post("/webhook/vapi", json=update,
                                      headers={"X-Vapi-Secret": WEBHOOK_SECRET})).status_code == 200
            body = json.dumps({"event": "call_ended", "call": {"call_id": "log-call"}}).encode()
            signed = {"x-retell-signature": retell_signature(RETELL_KEY, body, int(time.time() * 1000)),
                      "content-type": "application/json"}
            assert (await client.post("/webhook/retell", content=body, headers=signed)).status_code == 204
        log = url.log()
    assert '"WebSocket /llm-websocket/<redacted>/call-a" [accepted]' in log  # the handshake is still logged
    assert "POST /chat/completions HTTP/1.1" in log
    # Each refused guess is the one handshake line: no repeat through the websockets library, no false ERROR.
    refused = [line for line in log.splitlines() if re.search(r'"WebSocket [^"]+" 40[13]$', line)]
    assert len(refused) == len(guesses) and "connection rejected" not in log and "ERROR" not in log
    leaked = [line for line in log.splitlines() if _grep(line, SECRET, WEBHOOK_SECRET, RETELL_KEY, *NEAR_MISSES)]
    assert leaked == []


def test_the_console_logs_no_token(tmp_path):
    env = {"PIPECAT_HARNESS_CONSOLE_TOKEN": ADMIN,
           "PIPECAT_HARNESS_CONSOLE_TENANT_TOKENS": json.dumps({ACME: "acme"})}
    audit = f"sqlite+aiosqlite:///{tmp_path}/audit.db"
    with serving(["console", "--audit-url", audit], env, ready_path="/api/flagged") as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            for token in (ADMIN, ACME, ACME + "x"):
                client.get(f"/?token={token}")
                client.get("/api/flagged", headers={"Authorization": f"Bearer {token}"})
        log = url.log()
    assert "console on http://" in log
    assert _grep(log, ADMIN, ACME) == []
