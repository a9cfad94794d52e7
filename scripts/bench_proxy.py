"""What the proxy adds to time-to-first-token, and the CPU it spends per stream, at 1 to 400 concurrent streams.

Processes on loopback, all started by this script: a paced OpenAI-compatible
upstream (first token after ``--first-token-ms``, then ``--tokens`` tokens
every ``--token-ms``), and in front of it
* ``relay``: a raw byte relay (aiohttp in, aiohttp out, nothing parsed, idle
  upstream connections kept as long as the proxy keeps them): what any hop
  costs on this machine;
* ``proxy-bare``: ``pipecat-harness proxy --no-checklist`` (the serving path only);
* ``proxy``: ``pipecat-harness proxy`` with the checklist (memory store, rule analyzer).

Throughput with one and two worker processes is measured by
``scripts/bench_proxy_workers.py``, in a regime where the proxy is the bottleneck.

At each concurrency the same client streams from the upstream directly and
through each path, in rotating order; printed per path: added TTFT p50/p99
(path minus direct, same run) and CPU milliseconds per stream (the serving
processes' user+system time over the streams served); then, for both proxy
paths, the two figures the proxy is held to: CPU per stream as a ratio of
the relay's and the added p50, both from the same run, and the p50 beyond the
relay's (what the proxy adds over any hop on this machine). The upstream
stamps its receipt time into the first token, so each level also prints when
the model request went out (client send to upstream receipt, p50) and, per
proxy path, how much earlier or later than through the relay: the proxy's
own part of the added TTFT, without the upstream's pacing noise.

Two arrival patterns (``--arrival``): ``burst`` starts all N streams at the
same instant (the worst case: N requests parsed and sent upstream back to
back); ``steady`` keeps N streams in flight for ``--steady-secs``, their
starts spread evenly over one stream's length and each client starting its
next stream when one ends, as turns of N independent calls arrive.

    .venv/bin/python scripts/bench_proxy.py [--levels 1,50,100,200,400] [--rounds 2] [--arrival burst,steady]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CONTENT = re.compile(rb'"content":\s*"[^"]')
_RECEIVED = re.compile(rb'"content":\s*"at(\d+\.\d+) ')
_TICKS = os.sysconf("SC_CLK_TCK")
# Pending connections the upstream and the relay accept (aiohttp's default, 128, drops connection attempts
# of a 200-stream burst, and a dropped attempt is retried after a second); the proxy's uvicorn takes 2048.
_BACKLOG = 2048


# --------------------------------------------------------------------- servers


def serve_upstream(port: int, first_token_ms: float, token_ms: float, tokens: int) -> None:
    from aiohttp import web

    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench"}

    def event(delta: dict, finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n".encode()

    # The first token carries the time the request reached the upstream (the client subtracts its send time).
    events = [event({"content": f"word{i} "}, None) for i in range(1, tokens)]
    done = event({}, "stop") + b"data: [DONE]\n\n"

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        received = event({"content": f"at{time.time():.6f} "}, None)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(first_token_ms / 1000)
        await response.write(received)
        for piece in events:
            await asyncio.sleep(token_ms / 1000)
            await response.write(piece)
        await response.write(done)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=_BACKLOG)


def serve_relay(port: int, upstream_url: str) -> None:
    import aiohttp
    from aiohttp import web

    from pipecat_harness.proxy.openai_upstream import IDLE_CONNECTION_SECS

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        session: aiohttp.ClientSession = request.app["session"]
        async with session.post(upstream_url, data=body, headers={"Content-Type": "application/json"}) as upstream:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    async def start(app: web.Application) -> None:
        # The proxy's own upstream connection policy, so the two differ only in what they do with the bytes.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=IDLE_CONNECTION_SECS)
        app["session"] = aiohttp.ClientSession(connector=connector)

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_post("/v1/chat/completions", relay)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=_BACKLOG)


# ---------------------------------------------------------------------- client


def _body() -> bytes:
    return json.dumps({
        "model": "bench",
        "stream": True,
        "temperature": 0.7,
        "max_tokens": 250,
        "messages": [
            {"role": "system", "content": "You are Sam."},
            {"role": "assistant", "content": "Hi, it's Sam with the weekly check-in."},
            {"role": "user", "content": "No incidents, but a near miss at the warehouse."},
        ],
        "call": {"id": f"bench-{uuid.uuid4().hex}"},
    }).encode()


async def _ttft(session, url: str) -> tuple[float, float]:
    """Time to the first content token, and from sending the request to its arrival at the upstream."""
    started, sent = time.perf_counter(), time.time()
    first = out = None
    async with session.post(url, data=_body(), headers={"Content-Type": "application/json"}) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: {(await response.read())[:200]!r}")
        async for line in response.content:
            if first is None and _CONTENT.search(line):
                first = time.perf_counter() - started
                stamp = _RECEIVED.search(line)
                out = float(stamp.group(1)) - sent if stamp else None
    if first is None or out is None:
        raise RuntimeError(f"{url}: no content received, or its first token without the upstream's stamp")
    return first, out


async def _batch(url: str, concurrency: int) -> list[tuple[float, float]]:
    """``concurrency`` simultaneous streams; each one's TTFT and request-out time (see :func:`_ttft`)."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        await _ttft(session, url)  # warm one connection and the server's lazy imports
        return await asyncio.gather(*(_ttft(session, url) for _ in range(concurrency)))


async def _steady(url: str, concurrency: int, stream_secs: float, secs: float,
                  ) -> tuple[list[tuple[float, float]], int]:
    """``concurrency`` streams kept in flight for ``secs`` after one stream's length of ramp-up.

    Returns the TTFTs and request-out times of the streams started after the ramp-up, and how many streams
    were served in all.
    """
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    samples: list[tuple[float, float]] = []
    served = 0
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        await _ttft(session, url)
        started = time.perf_counter()

        async def client(index: int) -> None:
            nonlocal served
            await asyncio.sleep(index * stream_secs / concurrency)
            while time.perf_counter() - started < stream_secs + secs:
                began = time.perf_counter() - started
                measured = await _ttft(session, url)
                served += 1
                if began >= stream_secs:
                    samples.append(measured)

        await asyncio.gather(*(client(i) for i in range(concurrency)))
    return samples, served + 1


def _cpu_secs(pids: list[int]) -> float:
    """User+system CPU seconds of processes and their children."""
    total = 0.0
    for pid in pids:
        for task in [pid, *_children(pid)]:
            try:
                fields = Path(f"/proc/{task}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


def _children(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    found = [int(k) for k in kids]
    for kid in list(found):
        found.extend(_children(kid))
    return found


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_ready(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server for port {port} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


class Servers:
    """The processes of one run, their logs and their ports."""

    def __init__(self) -> None:
        self.logs = tempfile.TemporaryDirectory(prefix="bench-proxy-")
        self.processes: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        port = _free_port()
        log = open(Path(self.logs.name) / f"{name}.log", "w")
        command = [part.replace("{port}", str(port)) for part in command]
        self.processes[name] = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        self.ports[name] = port

    def wait(self) -> None:
        for name, process in self.processes.items():
            _wait_ready(self.ports[name], process)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}/v1/chat/completions"

    def dump(self) -> None:
        for name in self.processes:
            text = (Path(self.logs.name) / f"{name}.log").read_text()
            print(f"--- {name} (last lines) ---\n" + "".join(text.splitlines(keepends=True)[-20:]))

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        self.logs.cleanup()


def _proxy_command(upstream_port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pipecat_harness.cli", "proxy", "--port", "{port}", "--upstream", "openai",
            "--upstream-url", f"http://127.0.0.1:{upstream_port}/v1", "--upstream-model", "bench",
            "--log-level", "warning", *extra]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="bench", choices=("bench", "serve-upstream", "serve-relay"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream-url", default="")
    parser.add_argument("--first-token-ms", type=float, default=300.0)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--levels", default="1,50,100,200,400", help="concurrent streams, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="batches per level and path (1 stream: x10)")
    parser.add_argument("--arrival", default="burst", help="burst, steady or both (comma-separated)")
    parser.add_argument("--steady-secs", type=float, default=4.0, help="measured time per steady batch")
    args = parser.parse_args()
    if args.mode == "serve-upstream":
        serve_upstream(args.port, args.first_token_ms, args.token_ms, args.tokens)
        return
    if args.mode == "serve-relay":
        serve_relay(args.port, args.upstream_url)
        return

    levels = [int(level) for level in args.levels.split(",")]
    script = str(Path(__file__).resolve())
    servers = Servers()
    env = {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        servers.start("upstream", [sys.executable, script, "serve-upstream", "--port", "{port}",
                                   "--first-token-ms", str(args.first_token_ms), "--token-ms", str(args.token_ms),
                                   "--tokens", str(args.tokens)])
        servers.wait()
        upstream_port = servers.ports["upstream"]
        upstream_url = servers.url("upstream")
        servers.start("relay", [sys.executable, script, "serve-relay", "--port", "{port}",
                                "--upstream-url", upstream_url], env)
        servers.start("proxy-bare", _proxy_command(upstream_port, "--no-checklist"), env)
        servers.start("proxy", _proxy_command(upstream_port), env)
        servers.wait()
        per_level = [name for name in servers.processes if name != "upstream"]
        print(f"upstream: first token after {args.first_token_ms:.0f} ms, then {args.tokens} tokens every "
              f"{args.token_ms:.0f} ms; {os.cpu_count()} cores shared with whatever else runs")
        print(f"{'streams':>7} {'path':>11} {'n':>5} {'TTFT p50':>9} {'p99':>7} {'added p50':>10} {'p99':>7} "
              f"{'CPU ms/stream':>14}")
        stream_secs = (args.first_token_ms + args.tokens * args.token_ms) / 1000
        for arrival in args.arrival.split(","):
            if arrival not in ("burst", "steady"):
                raise SystemExit(f"--arrival: unknown pattern {arrival!r} (burst or steady)")
            print(f"arrival: {arrival}")
            for level in levels:
                rounds = args.rounds * (10 if level == 1 and arrival == "burst" else 1)
                samples: dict[str, list[float]] = {name: [] for name in ["direct", *per_level]}
                outs: dict[str, list[float]] = {name: [] for name in ["direct", *per_level]}
                cpu: dict[str, float] = dict.fromkeys(per_level, 0.0)
                served: dict[str, int] = dict.fromkeys(per_level, 0)
                order = ["direct", *per_level]
                for round_number in range(rounds):
                    rotated = order[round_number % len(order):] + order[: round_number % len(order)]
                    for name in rotated:
                        url = upstream_url if name == "direct" else servers.url(name)
                        pid = [] if name == "direct" else [servers.processes[name].pid]
                        before = _cpu_secs(pid)
                        if arrival == "burst":
                            measured = asyncio.run(_batch(url, level))
                            count = level + 1  # each batch warms with one stream
                        else:
                            measured, count = asyncio.run(_steady(url, level, stream_secs, args.steady_secs))
                        samples[name].extend(first for first, _ in measured)
                        outs[name].extend(out for _, out in measured)
                        if pid:
                            cpu[name] += _cpu_secs(pid) - before
                            served[name] += count
                direct50, direct99 = _pct(samples["direct"], 0.5), _pct(samples["direct"], 0.99)
                print(f"{level:>7} {'direct':>11} {len(samples['direct']):>5} {direct50:>8.1f} {direct99:>7.1f}")
                for name in per_level:
                    p50, p99 = _pct(samples[name], 0.5), _pct(samples[name], 0.99)
                    print(f"{level:>7} {name:>11} {len(samples[name]):>5} {p50:>8.1f} {p99:>7.1f} "
                          f"{p50 - direct50:>+9.1f} {p99 - direct99:>+7.1f} {cpu[name] * 1000 / served[name]:>14.2f}")
                relay_cpu = cpu["relay"] / served["relay"]
                relay50 = _pct(samples["relay"], 0.5)
                print(f"{level:>7} request out (client send to upstream receipt) p50: " + ", ".join(
                    f"{name} {_pct(outs[name], 0.5):.1f} ms" for name in ["direct", *per_level]))
                for name in ("proxy-bare", "proxy"):
                    ratio = cpu[name] / served[name] / relay_cpu if relay_cpu else float("nan")
                    p50 = _pct(samples[name], 0.5)
                    out = _pct(outs[name], 0.5) - _pct(outs["relay"], 0.5)
                    print(f"{level:>7} {name:>11}  CPU per stream {ratio:.2f}x the relay's (target <= 1.5x); "
                          f"added p50 {p50 - direct50:+.1f} ms vs direct (target <= +5 ms at 100 {arrival} streams), "
                          f"{p50 - relay50:+.1f} ms vs the relay; request out {out:+.1f} ms vs the relay")
    except Exception:
        servers.dump()
        raise
    finally:
        servers.stop()


if __name__ == "__main__":
    main()
