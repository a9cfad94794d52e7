"""Throughput of the checklist proxy with 1 and with 2 worker processes, in a regime where the proxy is the bottleneck.

What a second worker buys is only visible when the proxy's own CPU limits the
throughput. With a paced upstream the streams mostly wait (a batch takes as
long as its slowest stream whatever the proxy does), and a Python client and
an aiohttp upstream each cost about as much CPU per stream as the proxy does,
so on two cores they take the core the second worker needs. This script
therefore measures with:

* an upstream with no pacing, answering every request with one write of a
  prepared 32-event SSE body (an asyncio protocol, no HTTP framework): a few
  tens of microseconds per stream;
* ``wrk`` (C; Debian package ``wrk``) as the client, keeping ``--connections``
  streams in flight for ``--secs`` seconds, each request a new call (a Lua
  script numbers the call ids). Each stream comes on a new connection
  (``Connection: close``): the workers share one listening socket, and a
  keep-alive connection stays with the worker that accepted it, so
  connections all opened in the same instant can all land on one worker
  (``--keep-alive`` shows it);
* ``pipecat-harness proxy --store redis`` with ``--workers 1`` and
  ``--workers 2`` (the rule analyzer, the checklist state in the local Redis
  under a key prefix of this run, deleted at the end).

Each round runs both arms in turn (rounds alternate which goes first). Printed
per arm: requests per second (wrk's count of complete streams over its run),
the proxy processes' CPU per stream, the cores the proxy processes got (their
CPU seconds per second: below the worker count when other work on the machine
takes its share) and the streams per second per core they got (flat when the
proxy scales with the CPU it is given), and with two workers each worker's share
of the streams, read as its share of the bytes the workers wrote (every stream
writes the same bytes: its SSE answer, its upstream request, its Redis
commands), beside its share of the CPU. Then the 2-worker / 1-worker ratio.

What two cores allow: the client, the upstream and Redis still run on the
same two cores, so the second worker shares a core with them; their CPU per
stream is printed as a fraction of the proxy's, with the cores the proxy got
in each arm (the load average is printed before and after: other work on the
machine takes its share of the second core).

    .venv/bin/python scripts/bench_proxy_workers.py [--connections 64] [--secs 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_proxy import ROOT, Servers, _children, _cpu_secs, _proxy_command

_WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
%(connection)slocal counter = 0
request = function()
  counter = counter + 1
  local body = '{"model":"bench","stream":true,"messages":[' ..
    '{"role":"assistant","content":"Hi, it is Sam with the weekly check-in."},' ..
    '{"role":"user","content":"No incidents, but a near miss at the warehouse."}],' ..
    '"call":{"id":"%(run)s-' .. counter .. '"}}'
  return wrk.format(nil, "/v1/chat/completions", nil, body)
end
"""


# ---------------------------------------------------------------- the upstream


def _prepared_answer(tokens: int) -> bytes:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench"}
    events = []
    for i in range(tokens):
        choice = {"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}
        events.append(f"data: {json.dumps({**base, 'choices': [choice]})}\n\n")
    stop = {"index": 0, "delta": {}, "finish_reason": "stop"}
    events.append(f"data: {json.dumps({**base, 'choices': [stop]})}\n\ndata: [DONE]\n\n")
    body = "".join(events).encode()
    head = (f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {len(body)}\r\n"
            "Connection: keep-alive\r\n\r\n").encode()
    return head + body


class _Answering(asyncio.Protocol):
    """Reads each HTTP request (headers and a Content-Length body) and writes the prepared answer."""

    answer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer.extend(data)
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            match = re.search(rb"(?i)content-length:\s*(\d+)", bytes(self.buffer[:end]))
            size = end + 4 + (int(match.group(1)) if match else 0)
            if len(self.buffer) < size:
                return
            del self.buffer[:size]
            self.transport.write(self.answer)  # type: ignore[attr-defined]


def serve_upstream(port: int, tokens: int) -> None:
    import uvloop

    _Answering.answer = _prepared_answer(tokens)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Answering, "127.0.0.1", port, backlog=1024)
        await server.serve_forever()

    uvloop.run(main())


# -------------------------------------------------------------------- measuring


def _workers(pid: int) -> list[int]:
    """The serving processes under ``pid``: itself with one worker, its spawned workers with several."""
    kids = [kid for kid in _children(pid) if "resource_tracker" not in _cmdline(kid)]
    return kids or [pid]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _written(pid: int) -> int:
    """Bytes the process has written (sockets included), from /proc/<pid>/io."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/io has no wchar line")


def _redis_cpu(url: str) -> float:
    import redis

    client = redis.Redis.from_url(url)
    info = client.info("cpu")
    client.close()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _wrk(url: str, script: Path, connections: int, secs: float) -> tuple[int, float, float]:
    """Run wrk; (complete streams, their rate, wrk's own CPU seconds)."""
    process = subprocess.Popen(
        ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(secs))}s", "--timeout", "10s", "-s", str(script), url],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    _, status, usage = os.wait4(process.pid, 0)
    output = process.stdout.read().decode() if process.stdout else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}): {output}")
    if "Non-2xx" in output or "Socket errors" in output:
        raise RuntimeError(f"wrk saw failed requests:\n{output}")
    count = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    rate = float(re.search(r"Requests/sec:\s*([\d.]+)", output).group(1))  # type: ignore[union-attr]
    return count, rate, usage.ru_utime + usage.ru_stime


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="bench", choices=("bench", "serve-upstream"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=30, help="content events per answer")
    parser.add_argument("--connections", type=int, default=64, help="streams kept in flight by wrk")
    parser.add_argument("--secs", type=int, default=5, help="length of one wrk run (whole seconds)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep-alive", action="store_true",
                        help="reuse wrk's connections (each stays with the worker that accepted it)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    if args.mode == "serve-upstream":
        serve_upstream(args.port, args.tokens)
        return 0
    if shutil.which("wrk") is None:
        print("bench_proxy_workers: needs wrk (Debian/Ubuntu: apt-get install wrk)")
        return 2
    run = f"bench-workers-{uuid.uuid4().hex[:8]}"
    prefix = f"{run}:"
    env = {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PIPECAT_HARNESS_CHECKLIST__KEY_PREFIX": prefix}
    script_dir = tempfile.TemporaryDirectory(prefix="bench-workers-")
    script = Path(script_dir.name) / "turn.lua"
    connection = "" if args.keep_alive else 'wrk.headers["Connection"] = "close"\n'
    script.write_text(_WRK_SCRIPT % {"run": run, "connection": connection})
    servers = Servers()
    redis = ("--store", "redis", "--redis-url", args.redis_url)
    arms = {"1 worker": "proxy-1w", "2 workers": "proxy-2w"}
    try:
        servers.start("upstream", [sys.executable, str(Path(__file__).resolve()), "serve-upstream", "--port", "{port}",
                                   "--tokens", str(args.tokens)])
        servers.wait()
        upstream = servers.ports["upstream"]
        servers.start("proxy-1w", _proxy_command(upstream, *redis), env)
        servers.start("proxy-2w", _proxy_command(upstream, *redis, "--workers", "2"), env)
        servers.wait()
        print(f"load average before: {_load()}; {os.cpu_count()} cores; wrk -t1 -c{args.connections} "
              f"-d{args.secs:g}s; upstream: {args.tokens + 1} events in one write, no pacing")
        for name in arms.values():
            _wrk(servers.url(name), script, args.connections, 1.0)  # warm connections and lazy imports
        served = dict.fromkeys(arms, 0)
        seconds = dict.fromkeys(arms, 0.0)
        proxy_cpu = dict.fromkeys(arms, 0.0)
        other_cpu = dict.fromkeys(arms, 0.0)
        shares: list[list[tuple[int, float]]] = []
        upstream_pid = servers.processes["upstream"].pid
        for round_number in range(args.rounds):
            order = list(arms) if round_number % 2 == 0 else list(reversed(arms))
            for arm in order:
                name = arms[arm]
                workers = _workers(servers.processes[name].pid)
                cpu_before = [_cpu_secs([pid]) for pid in workers]
                written_before = [_written(pid) for pid in workers]
                side_before = _cpu_secs([upstream_pid]) + _redis_cpu(args.redis_url)
                count, rate, wrk_cpu = _wrk(servers.url(name), script, args.connections, args.secs)
                cpu = [_cpu_secs([pid]) - before for pid, before in zip(workers, cpu_before, strict=True)]
                written = [_written(pid) - before for pid, before in zip(workers, written_before, strict=True)]
                served[arm] += count
                seconds[arm] += count / rate
                proxy_cpu[arm] += sum(cpu)
                other_cpu[arm] += _cpu_secs([upstream_pid]) + _redis_cpu(args.redis_url) - side_before + wrk_cpu
                if len(workers) > 1:
                    shares.append([(w, c / max(sum(cpu), 1e-9)) for w, c in zip(written, cpu, strict=True)])
                print(f"  round {round_number + 1} {arm:>9}: {rate:8.1f} streams/s ({count} streams), proxy CPU "
                      f"{sum(cpu) * 1000 / count:.2f} ms/stream")
        rates = {arm: served[arm] / seconds[arm] for arm in arms}
        print(f"{'arm':>10} {'streams/s':>10} {'proxy CPU ms/stream':>20} {'cores the proxy got':>20} "
              f"{'streams/s per core':>19} {'client+upstream+Redis / proxy CPU':>34}")
        for arm in arms:
            cores = proxy_cpu[arm] / seconds[arm]
            print(f"{arm:>10} {rates[arm]:>10.1f} {proxy_cpu[arm] * 1000 / served[arm]:>20.2f} {cores:>20.2f} "
                  f"{rates[arm] / cores:>19.1f} {other_cpu[arm] / proxy_cpu[arm]:>34.2f}")
        for number, round_shares in enumerate(shares, 1):
            total = sum(w for w, _ in round_shares)
            parts = ", ".join(f"worker {i + 1}: {w / total:.0%} of streams ({c:.0%} of CPU)"
                              for i, (w, c) in enumerate(round_shares))
            print(f"2-worker run {number}: {parts}")
        cores = {arm: proxy_cpu[arm] / seconds[arm] for arm in arms}
        print(f"2 workers / 1 worker: {rates['2 workers'] / rates['1 worker']:.2f}x in streams/s, with "
              f"{cores['2 workers'] / cores['1 worker']:.2f}x the cores the proxy got")
        print(f"load average after: {_load()}")
    except Exception:
        servers.dump()
        raise
    finally:
        servers.stop()
        script_dir.cleanup()
        _clear(args.redis_url, prefix)
    return 0


def _clear(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start:start + 1000])
    client.close()


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"({time.monotonic() - started:.0f} s)")
    raise SystemExit(code)
