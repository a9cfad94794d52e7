"""How much one huge request delays a normal turn of another call on the same proxy worker.

Runs the proxy app in process (one event loop, as one uvicorn worker) and
measures a normal one-turn request's latency alone and while a large request
is in flight: a 10,000-turn request under the default limits (refused by
size), a request at the default limits (1,000 messages, ~180,000 characters,
accepted and analysed), and the 10,000-turn request with the limits raised
to accept it. Prints the median alone, the worst during, and their
difference and ratio.

    python scripts/bench_proxy_isolation.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import httpx

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.limits import ProxyLimits
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.state.memory import MemoryStateStore

HEADERS = {"content-type": "application/json"}


def _body(call_id: str, turns: int, words: int) -> bytes:
    messages = []
    for index in range(turns):
        messages.append({"role": "user", "content": " ".join(["nothing to report"] * words) + f" ({index})"})
        messages.append({"role": "assistant", "content": "ok"})
    return json.dumps({"messages": messages, "call": {"id": call_id}, "stream": True}).encode()


async def _case(name: str, limits: ProxyLimits, big: bytes, rounds: int) -> None:
    service = ProxyService(ScriptedUpstream(), ChecklistDriver(bundled_checklist(), MemoryStateStore()))
    app = create_app(service, limits=limits)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy", timeout=120) as client:
        counter = 0

        async def normal() -> float:
            nonlocal counter
            counter += 1
            started = time.perf_counter()
            response = await client.post("/chat/completions", content=_body(f"n{counter}", 1, 1), headers=HEADERS)
            assert response.status_code == 200
            return time.perf_counter() - started

        await client.post("/chat/completions", content=big.replace(b'"big"', b'"warm"', 1), headers=HEADERS)
        alone = statistics.median([await normal() for _ in range(9)])
        worst = []
        status = 0
        for round_ in range(rounds):
            task = asyncio.create_task(
                client.post("/chat/completions", content=big.replace(b'"big"', f'"big{round_}"'.encode(), 1),
                            headers=HEADERS)
            )
            during = [await normal()]
            while not task.done():
                during.append(await normal())
            status = (await task).status_code
            worst.append(max(during))
        during_worst = statistics.median(worst)
    print(
        f"{name:<44} {len(big) / 1e6:5.2f} MB -> {status}  alone p50 {alone * 1000:6.1f} ms  "
        f"during worst {during_worst * 1000:6.1f} ms  delay {(during_worst - alone) * 1000:6.1f} ms  "
        f"ratio {during_worst / alone:4.1f}x"
    )


async def main(rounds: int) -> None:
    huge = _body("big", 10_000, 1)
    at_limits = _body("big", 500, 21)
    raised = ProxyLimits(
        max_body_bytes=5_000_000, max_messages=25_000, max_total_chars=2_000_000, max_json_containers=100_000
    )
    await _case("10,000 turns, default limits (refused)", ProxyLimits(), huge, rounds)
    await _case("1,000 messages at the default limits", ProxyLimits(), at_limits, rounds)
    await _case("10,000 turns, limits raised to accept it", raised, huge, rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args().rounds))
