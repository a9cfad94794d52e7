"""Benchmark the tool gate and the operation ledger.

Prints:
* gate overhead per call against calling the handler directly (a ratio measured
  in the same run), for reads, first writes and suppressed duplicates;
* operation-ledger throughput (prepare + claim + settle with its outbox event)
  on SQLite and, when reachable, PostgreSQL at 127.0.0.1:5432.

Usage: .venv/bin/python scripts/bench_tools.py [--calls N] [--ops N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from pipecat_harness.tools import OperationLedger, ToolGate

POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


async def handler(arguments: Mapping[str, Any]) -> Any:
    await asyncio.sleep(0)  # a handler awaits its backend at least once
    return {"status": "ok", "order_id": arguments.get("order_id")}


async def _time(label: str, calls: int, run: Callable[[int], Awaitable[Any]]) -> float:
    for i in range(min(200, calls)):  # warm-up
        await run(i)
    started = time.perf_counter()
    for i in range(calls):
        await run(i)
    per_call = (time.perf_counter() - started) / calls
    print(f"  {label:<38} {per_call * 1e6:9.1f} µs/call")
    return per_call


async def bench_gate(calls: int) -> None:
    print(f"Gate overhead ({calls} calls each)")
    base = await _time("handler called directly", calls, lambda i: handler({"order_id": f"#W{i}", "amount_usd": 45}))

    gate = ToolGate(write_tools={"issue_refund"})
    read = await _time("gate: read", calls,
                       lambda i: gate.call("get_order_details", {"order_id": f"#W{i}"}, handler))
    write = await _time("gate: distinct writes (in memory)", calls,
                        lambda i: gate.call("issue_refund", {"order_id": f"#W{i}", "amount_usd": 45}, handler))
    await gate.call("issue_refund", {"order_id": "#DUP", "amount_usd": 45}, handler)
    duplicate = await _time("gate: suppressed duplicate", calls,
                            lambda i: gate.call("issue_refund", {"order_id": "#DUP", "amount_usd": 45}, handler))
    print(f"  ratio read/direct {read / base:.1f}x, write/direct {write / base:.1f}x, "
          f"duplicate/direct {duplicate / base:.1f}x "
          f"(absolute overhead per write {(write - base) * 1e6:.0f} µs)")


async def bench_ledger(url: str, label: str, ops: int) -> float | None:
    ledger = OperationLedger(url, table_prefix=f"bench{uuid.uuid4().hex[:8]}_")
    try:
        await ledger.create_tables()
    except Exception as exc:
        print(f"  {label:<10} skipped: not reachable ({type(exc).__name__}: {exc})")
        await ledger.close()
        return None
    try:
        async def operation() -> Any:
            return {"ok": True}

        started = time.perf_counter()
        for i in range(ops):
            record, _ = await ledger.prepare("bench", f"key-{i}", "issue_refund", "h")
            await ledger.execute(record, operation)
        elapsed = time.perf_counter() - started
        rate = ops / elapsed
        print(f"  {label:<10} {rate:8.0f} operations/s ({elapsed / ops * 1e3:.2f} ms per operation: "
              f"prepare, claim, settle + outbox event)")

        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, tenant="bench-gate")
        started = time.perf_counter()
        for i in range(ops):
            await gate.call("issue_refund", {"order_id": f"#W{i}", "amount_usd": 45}, handler)
        gate_elapsed = time.perf_counter() - started
        print(f"  {'':<10} gate with this ledger: {gate_elapsed / ops * 1e3:.2f} ms per write "
              f"({gate_elapsed / elapsed:.2f}x the bare ledger operation)")
        return rate
    finally:
        await ledger.drop_tables()
        await ledger.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="gate calls per measurement")
    parser.add_argument("--ops", type=int, default=200, help="ledger operations per backend")
    args = parser.parse_args()
    await bench_gate(args.calls)
    print(f"Operation ledger ({args.ops} operations each)")
    with TemporaryDirectory() as tmp:
        sqlite = await bench_ledger(f"sqlite+aiosqlite:///{Path(tmp) / 'ledger.db'}", "SQLite", args.ops)
    postgres = await bench_ledger(POSTGRES_URL, "PostgreSQL", args.ops)
    if sqlite and postgres:
        print(f"  PostgreSQL/SQLite throughput ratio {postgres / sqlite:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
