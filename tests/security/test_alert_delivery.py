"""Grader alerts against hostile receivers and a killed process: every alert is delivered or counted failed.

The receiver is a real socket server on loopback that answers garbage, a
cut-off body, a 100 KB header line, or resets the connection. The in-memory
alerter counts each such alert failed and goes on delivering; the grader's
default alert path (an outbox in the audit database) keeps alerts queued by a
process that is then SIGKILLed, and a new process delivers every one of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pipecat_harness.config import GraderSettings
from pipecat_harness.grader.alerts import SIGNATURE_HEADER, WebhookAlerter, verify_signature
from pipecat_harness.grader.control import _alerter

ROOT = Path(__file__).resolve().parents[2]
SECRET = "alert-secret-31f0"
CREDENTIALS = (SECRET,)
HOSTILE = ("garbage", "truncated", "huge_header", "reset")


class Receiver:
    """A webhook receiver whose answer is :attr:`mode`; it keeps the signed bodies it accepted."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.accepted: list[dict] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line)
        lowered = {k.lower(): v for k, v in headers.items()}
        body = await reader.readexactly(int(lowered.get("content-length", "0")))
        if self.mode == "garbage":
            writer.write(b"\x00\x17 not http at all\r\n\r\n")
        elif self.mode == "truncated":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"ok\":")
        elif self.mode == "huge_header":
            writer.write(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 100_000 + b"\r\nContent-Length: 0\r\n\r\n")
        elif self.mode == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        else:
            assert verify_signature(SECRET, body, lowered[SIGNATURE_HEADER.lower()])
            self.accepted.append(json.loads(body))
            writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/hook"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hook = Receiver()
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def _payload(index: int) -> dict:
    return {"event": "hallucination_grader.flag", "tenant_id": "acme", "call_id": "call-k", "severity": "critical",
            "audit_row_ref": f"audit_{index}"}


@pytest.mark.parametrize("mode", HOSTILE)
async def test_a_hostile_receiver_never_loses_an_alert_of_the_in_memory_alerter(receiver: Receiver, mode: str):
    alerter = WebhookAlerter(receiver.url, SECRET, max_attempts=2, backoff_secs=0.01, timeout_secs=2)
    receiver.mode = mode
    for index in range(5):
        assert alerter.send(_payload(index))
    await alerter.drain(30)
    assert len(alerter.stats.failed) == 5 and alerter.stats.delivered == [] and alerter.stats.attempts == 10
    assert all(mode != "reset" or "Connection" in str(f["_error"]) for f in alerter.stats.failed)
    receiver.mode = "ok"  # the delivery task is still alive: the next alert goes out
    assert alerter.send(_payload(99))
    await alerter.drain(30)
    await alerter.close()
    assert [p["audit_row_ref"] for p in alerter.stats.delivered] == ["audit_99"]
    assert [a["audit_row_ref"] for a in receiver.accepted] == ["audit_99"]


#: A grader process on the default alert path: it queues 20 alerts while the receiver is hostile, then hangs.
_CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from pipecat_harness.config import GraderSettings
    from pipecat_harness.grader.control import _alerter

    async def main():
        alerter = _alerter(GraderSettings.model_validate(json.loads(sys.argv[1])))
        for index in range(20):
            await alerter.dispatch({"event": "hallucination_grader.flag", "tenant_id": "acme", "call_id": "call-k",
                                    "severity": "critical", "audit_row_ref": f"audit_{index}"})
        print("queued", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


async def test_alerts_queued_by_a_killed_process_are_all_delivered_after_a_restart(
    receiver: Receiver, tmp_path: Path
):
    settings = GraderSettings(webhook_url=receiver.url, webhook_secret=SECRET, webhook_max_attempts=20,
                              webhook_backoff_secs=5, audit_url=f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}")
    receiver.mode = "garbage"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, settings.model_dump_json(), stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert child.stdout is not None
    try:
        assert (await asyncio.wait_for(child.stdout.readline(), 60)).decode().strip() == "queued"
        for mode in HOSTILE:  # whatever it tries meets a hostile receiver
            receiver.mode = mode
            await asyncio.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert receiver.accepted == []
    receiver.mode = "ok"
    restarted = _alerter(settings)
    assert restarted is not None
    await restarted.drain(30)
    await restarted.close()
    assert sorted(int(a["audit_row_ref"].split("_")[1]) for a in receiver.accepted) == list(range(20))
