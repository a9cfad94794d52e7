"""Time to first token through the proxy versus directly to the same local upstream.

Starts a local OpenAI-compatible upstream (fixed first-token delay, then a
token every few milliseconds) and the proxy in front of it (memory checklist
store, rule analyzer, OpenAI-compatible upstream client), each in its own
process on loopback. The same client then streams from both at 1 and at 100
concurrent streams and prints p50/p99 time to first token and the ratio
proxy/direct measured in this run.

    .venv/bin/python scripts/bench_proxy.py [--rounds 3] [--sequential 40]
"""

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def serve_upstream(port: int, first_token_ms: float, token_ms: float, tokens: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def completions(request: Request) -> StreamingResponse:
        await request.body()

        async def events():
            base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench"}
            await asyncio.sleep(first_token_ms / 1000)
            for i in range(tokens):
                if i:
                    await asyncio.sleep(token_ms / 1000)
                choice = {"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}
                yield f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"
            done = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            yield f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def serve_proxy(port: int, upstream_url: str) -> None:
    import uvicorn

    from pipecat_harness.config import HarnessConfig
    from pipecat_harness.proxy.app import create_app
    from pipecat_harness.proxy.command import build_service
    from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream

    upstream = OpenAICompatibleUpstream(upstream_url, model="bench")
    uvicorn.run(create_app(build_service(HarnessConfig(), upstream)), host="127.0.0.1", port=port, log_level="warning")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _body() -> dict:
    return {
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
    }


async def _ttft(client: httpx.AsyncClient, url: str) -> float:
    started = time.perf_counter()
    first = None
    async with client.stream("POST", url, json=_body()) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if first is None and line.startswith("data: {") and '"content":"' in line.replace(": ", ":"):
                chunk = json.loads(line[6:])
                if chunk["choices"][0]["delta"].get("content"):
                    first = time.perf_counter() - started
    if first is None:
        raise RuntimeError(f"{url}: no content received")
    return first


async def _measure(url: str, concurrency: int, count: int) -> list[float]:
    limits = httpx.Limits(
        max_connections=concurrency + 10, max_keepalive_connections=concurrency + 10, keepalive_expiry=2.0
    )
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        await _ttft(client, url)  # warm up the connection and imports
        samples: list[float] = []
        while len(samples) < count:
            batch = min(concurrency, count - len(samples))
            samples.extend(await asyncio.gather(*(_ttft(client, url) for _ in range(batch))))
        return samples


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def _wait_ready(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="bench", choices=("bench", "serve-upstream", "serve-proxy"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream-url", default="")
    parser.add_argument("--first-token-ms", type=float, default=50.0)
    parser.add_argument("--token-ms", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--sequential", type=int, default=40, help="requests at concurrency 1")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of 100 concurrent streams")
    args = parser.parse_args()
    if args.mode == "serve-upstream":
        serve_upstream(args.port, args.first_token_ms, args.token_ms, args.tokens)
        return
    if args.mode == "serve-proxy":
        serve_proxy(args.port, args.upstream_url)
        return

    upstream_port, proxy_port = _free_port(), _free_port()
    script = str(Path(__file__).resolve())
    logs = tempfile.TemporaryDirectory(prefix="bench-proxy-")
    upstream_log = open(Path(logs.name) / "upstream.log", "w")
    proxy_log = open(Path(logs.name) / "proxy.log", "w")
    processes = [
        subprocess.Popen(
            [sys.executable, script, "serve-upstream", "--port", str(upstream_port),
             "--first-token-ms", str(args.first_token_ms), "--token-ms", str(args.token_ms),
             "--tokens", str(args.tokens)],
            cwd=ROOT, stdout=upstream_log, stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [sys.executable, script, "serve-proxy", "--port", str(proxy_port),
             "--upstream-url", f"http://127.0.0.1:{upstream_port}/v1"],
            cwd=ROOT, stdout=proxy_log, stderr=subprocess.STDOUT,
        ),
    ]
    try:
        _wait_ready(upstream_port)
        _wait_ready(proxy_port)
        direct_url = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
        proxy_url = f"http://127.0.0.1:{proxy_port}/v1/chat/completions"
        print(f"upstream: first token after {args.first_token_ms:.0f} ms, then {args.tokens} tokens every "
              f"{args.token_ms:.0f} ms; proxy: memory checklist store, rule analyzer")
        print(f"{'streams':>8} {'path':>7} {'n':>5} {'p50 ms':>9} {'p99 ms':>9}")
        for concurrency, count in ((1, args.sequential), (100, 100 * args.rounds)):
            direct = asyncio.run(_measure(direct_url, concurrency, count))
            proxied = asyncio.run(_measure(proxy_url, concurrency, count))
            for name, samples in (("direct", direct), ("proxy", proxied)):
                p50, p99 = _pct(samples, 0.5), _pct(samples, 0.99)
                print(f"{concurrency:>8} {name:>7} {len(samples):>5} {p50:>9.1f} {p99:>9.1f}")
            print(
                f"{concurrency:>8} {'ratio':>7} {'':>5} {_pct(proxied, 0.5) / _pct(direct, 0.5):>8.2f}x "
                f"{_pct(proxied, 0.99) / _pct(direct, 0.99):>8.2f}x   (proxy / direct; mean "
                f"{statistics.mean(proxied) * 1000:.1f} vs {statistics.mean(direct) * 1000:.1f} ms)"
            )
    except Exception:
        for log in (upstream_log, proxy_log):
            log.flush()
            print(f"--- {log.name} (last lines) ---")
            print("".join(Path(log.name).read_text().splitlines(keepends=True)[-30:]))
        raise
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)
        upstream_log.close()
        proxy_log.close()
        logs.cleanup()


if __name__ == "__main__":
    main()
