"""The proxy's webhooks against uploads an attacker controls: a real proxy process, raw sockets on loopback.

A webhook without a well-formed, fresh credential is answered 401 before a
byte of its body is read (the client has sent only headers announcing a large
body); an upload abandoned half-way writes no traceback and at most one log
line, on both routes, with a credential or without.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from tests.security.servers import serving

SECRET, RETELL_KEY = "upload-secret-5c1e", "upload-retell-key-77ab"
CREDENTIALS = (SECRET, RETELL_KEY)
ENV = {
    "PIPECAT_HARNESS_PROXY__SECRETS": json.dumps([SECRET]),
    "PIPECAT_HARNESS_PROXY__RETELL_API_KEYS": json.dumps([RETELL_KEY]),
}


@pytest.fixture(scope="module")
def proxy():
    with serving(["proxy"], ENV) as url:
        yield url


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _head(path: str, headers: dict[str, str], length: int) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
             f"Content-Length: {length}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _fresh_ms() -> str:
    return str(int(time.time() * 1000))


UNSIGNED = [
    ("/webhook/retell", {}),
    ("/webhook/retell", {"x-retell-signature": "v=1,d=" + "0" * 64}),  # well-formed, stale
    ("/webhook/retell", {"x-retell-signature": "garbage"}),
    ("/webhook/vapi", {}),
    ("/webhook/vapi", {"x-signature": "abc"}),  # no timestamp, not a digest
    ("/webhook/vapi", {"x-signature": "0" * 64, "x-timestamp": "1"}),  # stale
    ("/webhook/vapi", {"X-Vapi-Secret": "wrong"}),
]


@pytest.mark.parametrize(("path", "headers"), UNSIGNED)
def test_a_webhook_without_a_fresh_credential_is_refused_before_its_body_is_read(proxy, path, headers):
    with _connect(proxy) as client:
        client.sendall(_head(path, headers, 500_000))  # the body never comes
        client.settimeout(5)
        answer = client.recv(4096)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


SIGNED = [
    ("/webhook/retell", lambda: {"x-retell-signature": f"v={_fresh_ms()},d={'a' * 64}"}),
    ("/webhook/vapi", lambda: {"x-signature": "b" * 64, "x-timestamp": _fresh_ms()}),
    ("/webhook/vapi", lambda: {"X-Vapi-Secret": SECRET}),
    ("/webhook/retell", dict),
    ("/webhook/vapi", dict),
]


def test_an_abandoned_upload_writes_no_traceback_and_at_most_one_line(proxy):
    before = len(proxy.log().splitlines())
    aborted = 0
    for _ in range(10):
        for path, headers in SIGNED:
            with _connect(proxy) as client:
                client.sendall(_head(path, headers(), 1_000) + b'{"message": {"type": "conv')  # ...and leave
            aborted += 1
    time.sleep(0.5)
    assert httpx.get(proxy + "/health", timeout=10).status_code == 200
    time.sleep(0.5)
    written = proxy.log().splitlines()[before:]
    assert not [line for line in written if "Traceback" in line or "Exception" in line], written[:30]
    assert len(written) <= aborted
