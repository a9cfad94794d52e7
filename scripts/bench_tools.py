"""Benchmark the tool gate and the operation ledger, each figure against a baseline measured in the same run.

Prints:
* the gate's own overhead on a write without a ledger (target < 50 µs) against calling the handler directly;
* the full write lifecycle through the gate with its ledger record and outbox row on SQLite, against raw
  ``sqlite3`` (WAL, ``synchronous=NORMAL``) issuing the same statements into the ledger's own tables
  (target ≥ 2,000 operations/s);
* on PostgreSQL: the same lifecycle against raw ``asyncpg`` sending the same statements with the same commit
  settings (a durable insert, the settling statement with ``synchronous_commit`` off) into the ledger's own
  tables (target ≥ 60 %), at 10 concurrent calls
  against an ``asyncpg`` pool (target ≥ 800 operations/s), and p99 latency at 100 concurrent calls (≤ 100 ms),
  both paced (each call pauses ``--pause`` seconds between writes, as callers talk between tool calls) and
  saturated (every call writing back to back: latency is then 100 / throughput, whatever the ledger does);
* the cost of a write with 100,000 records already in the ledger against an empty one (flat: ≈ 1×);
* connections held by 50 concurrent calls, each with its own gate and ledger (one shared pool per URL).

Usage: .venv/bin/python scripts/bench_tools.py [--ops N] [--calls N] [--grown N]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipecat_harness.tools import OperationLedger, ToolGate

POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


async def handler(arguments: Mapping[str, Any]) -> Any:
    await asyncio.sleep(0)  # a handler awaits its backend at least once
    return {"status": "ok", "order_id": arguments.get("order_id")}


async def _per_call(calls: int, run: Callable[[int], Awaitable[Any]],
                    clock: Callable[[], float] = time.perf_counter) -> float:
    for i in range(min(200, calls)):  # warm-up
        await run(-1 - i)
    started = clock()
    for i in range(calls):
        await run(i)
    return (clock() - started) / calls


async def bench_overhead(calls: int) -> None:
    """The gate's own work per write, in CPU time of this process (wall time on a shared machine adds
    whatever else runs) and in wall time."""
    for label, clock in (("CPU", time.process_time), ("wall", time.perf_counter)):
        base = await _per_call(calls, lambda i: handler({"order_id": f"#W{i}", "amount_usd": 45}), clock)
        gate = ToolGate(write_tools={"issue_refund"}, timeout_secs=None, session_id=f"overhead-{label}")
        write = await _per_call(calls, lambda i, gate=gate: gate.call(
            "issue_refund", {"order_id": f"#W{i}", "amount_usd": 45}, handler), clock)
        print(f"Gate overhead on a write without a ledger ({label} time): {(write - base) * 1e6:.1f} µs "
              f"(handler alone {base * 1e6:.1f} µs, through the gate {write * 1e6:.1f} µs, "
              f"{write / base:.1f}x; target < 50 µs)")


_COLUMNS = ("tenant, idempotency_key, scope, attempt, op_type, request_hash, status, result, error, version, "
            "created_at, updated_at, owner, lease_until, resource")
_OUTBOX = ("event_id, seq, tenant, idempotency_key, event_type, payload, created_at, published_at, attempts, "
           "last_error, claimed_by, claimed_until")


async def _ledger_tables(url: str) -> tuple[OperationLedger, str]:
    """The ledger's own tables (same columns, indexes and resource claim) for a baseline to write into."""
    prefix = f"raw{uuid.uuid4().hex[:8]}_"
    ledger = OperationLedger(url, table_prefix=prefix)
    await ledger.create_tables()
    return ledger, prefix


def raw_sqlite(path: Path, prefix: str, ops: int) -> float:
    """The gate's statements for one write, on plain sqlite3 (WAL, synchronous=NORMAL, BEGIN IMMEDIATE, as the
    ledger's writer thread): insert executing; update + outbox row; into the ledger's own tables."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    insert = (f"INSERT INTO {prefix}operations ({_COLUMNS}) VALUES (?, ?, ?, 1, 'w', 'h', 'executing', NULL, NULL, "
              f"1, ?, ?, 'o', ?, '') ON CONFLICT DO NOTHING")
    settle = (f"UPDATE {prefix}operations SET status = 'succeeded', result = '{{}}', error = NULL, version = 2, "
              "updated_at = ?, lease_until = 0 WHERE tenant = ? AND idempotency_key = ? AND version = 1")
    outbox = (f"INSERT INTO {prefix}outbox ({_OUTBOX}) VALUES (?, 2, 't', ?, 'operation.succeeded', '{{}}', ?, "
              "NULL, 0, NULL, NULL, 0)")
    started = time.perf_counter()
    for i in range(ops):
        now, key = time.time(), f"k{i}"
        db.execute("BEGIN IMMEDIATE")
        db.execute(insert, ("t", key, "s", now, now, now + 5))
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute(settle, (now, "t", key))
        db.execute(outbox, (uuid.uuid4().hex, key, now))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - started
    db.close()
    return ops / elapsed


async def gate_lifecycle(url: str, ops: int, *, concurrency: int = 1,
                         latencies: list[float] | None = None, pause_secs: float = 0.0,
                         cpu_per_op: list[float] | None = None) -> float:
    """Writes through gates (one per call, as the harness builds them) on one ledger URL."""
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    ledger = OperationLedger(url, table_prefix=prefix)
    await ledger.create_tables()
    try:
        gates = [ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id=f"call{n}", timeout_secs=None)
                 for n in range(concurrency)]
        for gate in gates:  # warm-up
            await gate.call("issue_refund", {"order_id": "#warm"}, handler)

        async def calls(gate: ToolGate, count: int) -> None:
            for i in range(count):
                started = time.perf_counter()
                await gate.call("issue_refund", {"order_id": f"#W{i}", "amount_usd": 45}, handler)
                if latencies is not None:
                    latencies.append(time.perf_counter() - started)
                if pause_secs:  # a caller talks between two writes
                    await asyncio.sleep(pause_secs)

        per = max(1, ops // concurrency)
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(calls(gate, per) for gate in gates))
        if cpu_per_op is not None:  # this process's CPU (the loop and the ledger's threads) per write
            cpu_per_op.append((time.process_time() - cpu) / (per * concurrency))
        return per * concurrency / (time.perf_counter() - started)
    finally:
        await ledger.drop_tables()
        await ledger.close()


async def raw_asyncpg(ops: int, concurrency: int = 1) -> float:
    """The gate's statements for one write on raw asyncpg, with the ledger's commit settings, into its own tables:
    a durable insert of the executing record, then one statement that settles it and writes the outbox row with
    ``synchronous_commit`` off for that statement's transaction (one pooled connection per statement)."""
    import asyncpg

    ledger, prefix = await _ledger_tables(POSTGRES_URL)
    pool = await asyncpg.create_pool(POSTGRES_DSN, min_size=concurrency, max_size=concurrency, reset=_no_reset)
    insert = (f"INSERT INTO {prefix}operations ({_COLUMNS}) VALUES ($1, $2, $3, 1, 'w', 'h', 'executing', NULL, NULL, "
              "1, $4, $4, 'o', $5, '') ON CONFLICT DO NOTHING")
    settle = (f"WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)), changed AS ("
              f"UPDATE {prefix}operations SET status = 'succeeded', result = '{{}}', error = NULL, version = 2, "
              "updated_at = $1, lease_until = 0 WHERE tenant = $2 AND idempotency_key = $3 AND version = 1 "
              "RETURNING 1) "
              f"INSERT INTO {prefix}outbox ({_OUTBOX}) SELECT $4::varchar, 2, $2::varchar, $3::varchar, "
              "'operation.succeeded', '{}', $1::float8, NULL, 0, NULL, NULL, 0 FROM changed, relaxed")

    async def worker(n: int, count: int) -> None:
        for i in range(count):
            key, now = f"k{n}-{i}", time.time()
            async with pool.acquire() as conn:
                await conn.execute(insert, "t", key, "s", now, now + 5)
            async with pool.acquire() as conn:
                await conn.execute(settle, now, "t", key, uuid.uuid4().hex)

    per = max(1, ops // concurrency)
    started = time.perf_counter()
    await asyncio.gather(*(worker(n, per) for n in range(concurrency)))
    rate = per * concurrency / (time.perf_counter() - started)
    await pool.close()
    await ledger.drop_tables()
    await ledger.close()
    return rate


async def _no_reset(_connection: Any) -> None:
    """The ledger's pool does not reset connections on release either."""


async def grown_cost(url: str, ops: int, grown: int) -> tuple[float, float]:
    """Per-write time with an empty ledger and with ``grown`` records (half of them unknown) already in it."""
    prefix = f"grow{uuid.uuid4().hex[:8]}_"
    ledger = OperationLedger(url, table_prefix=prefix)
    await ledger.create_tables()
    try:
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call-a", timeout_secs=None)
        empty = await _per_call(ops, lambda i: gate.call("issue_refund", {"order_id": f"#A{i}"}, handler))
        rows = [{"tenant": "default", "idempotency_key": f"old{n}", "scope": f"old-call-{n % 500}:issue_refund:h",
                 "attempt": 1, "op_type": "issue_refund", "request_hash": "h",
                 "status": "outcome_unknown" if n % 2 else "succeeded", "result": None, "error": None,
                 "version": 2, "created_at": 0.0, "updated_at": 0.0, "owner": "", "lease_until": 0.0}
                for n in range(grown)]
        async with ledger.begin() as conn:
            for first in range(0, grown, 5000):
                await conn.execute(ledger.tables.operations.insert(), rows[first:first + 5000])
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call-b", timeout_secs=None)
        full = await _per_call(ops, lambda i: gate.call("issue_refund", {"order_id": f"#B{i}"}, handler))
        return empty, full
    finally:
        await ledger.drop_tables()
        await ledger.close()


async def connections_for_50_calls() -> tuple[int, float, float]:
    """Connections 50 concurrent calls hold (each its own gate and ledger object), and first-write latencies."""
    import asyncpg

    prefix = f"conn{uuid.uuid4().hex[:8]}_"
    setup = OperationLedger(POSTGRES_URL, table_prefix=prefix)
    await setup.create_tables()
    release = asyncio.Event()
    firsts: list[float] = []

    async def slow(arguments: Mapping[str, Any]) -> Any:
        await release.wait()
        return {"ok": True}

    async def call(n: int) -> None:
        ledger = OperationLedger(POSTGRES_URL, table_prefix=prefix)
        await ledger.create_tables()
        gate = ToolGate(write_tools={"w"}, ledger=ledger, session_id=f"c{n}", timeout_secs=None)
        started = time.perf_counter()
        await gate.call("w", {"n": n}, handler)
        firsts.append(time.perf_counter() - started)
        await gate.call("w", {"n": n, "again": 1}, slow)
        await ledger.close()

    tasks = [asyncio.create_task(call(n)) for n in range(50)]
    await asyncio.sleep(1.0)
    probe = await asyncpg.connect(POSTGRES_DSN)
    held = await probe.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                                "AND datname = 'test' AND backend_type = 'client backend'")
    await probe.close()
    release.set()
    await asyncio.gather(*tasks)
    await setup.drop_tables()
    await setup.close()
    firsts.sort()
    return int(held), firsts[0], firsts[len(firsts) // 2]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000, help="write operations per measurement")
    parser.add_argument("--calls", type=int, default=5000, help="gate calls for the overhead measurement")
    parser.add_argument("--grown", type=int, default=100_000, help="records already in the ledger")
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--pause", type=float, default=0.5,
                        help="seconds each of the 100 concurrent calls waits between its writes (paced p99)")
    args = parser.parse_args()
    await bench_overhead(args.calls)
    if args.database != "postgres":
        await bench_sqlite(args)
    if args.database != "sqlite":
        await bench_postgres(args)


async def bench_sqlite(args: argparse.Namespace) -> None:
    with TemporaryDirectory() as tmp:
        raw_ledger, prefix = await _ledger_tables(f"sqlite+aiosqlite:///{Path(tmp) / 'raw.db'}")
        raw = raw_sqlite(Path(tmp) / "raw.db", prefix, args.ops)
        await raw_ledger.close()
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'ledger.db'}"
        cpu: list[float] = []
        ledger_rate = await gate_lifecycle(url, args.ops, cpu_per_op=cpu)
        print(f"SQLite write lifecycle (gate + ledger record + outbox row): {ledger_rate:,.0f} operations/s "
              f"({cpu[0] * 1e6:.0f} µs CPU each); "
              f"raw sqlite3, same statements, tables and commit settings: {raw:,.0f}/s; ratio {ledger_rate / raw:.2f} "
              f"(target ≥ 2,000/s)")
        empty, full = await grown_cost(url, min(args.ops, 500), args.grown)
        print(f"SQLite write with {args.grown:,} records in the ledger: {full * 1e3:.2f} ms vs {empty * 1e3:.2f} ms "
              f"empty ({full / empty:.2f}x)")


async def bench_postgres(args: argparse.Namespace) -> None:
    try:
        raw_pg = await raw_asyncpg(args.ops)
    except Exception as exc:
        print(f"PostgreSQL: skipped, not reachable ({type(exc).__name__}: {exc})")
        return
    pg = await gate_lifecycle(POSTGRES_URL, args.ops)
    print(f"PostgreSQL write lifecycle: {pg:,.0f} operations/s; raw asyncpg, same statements, tables and commit "
          f"settings: {raw_pg:,.0f}/s; ratio {pg / raw_pg:.2f} (target ≥ 0.60)")
    pool10 = await raw_asyncpg(args.ops, concurrency=10)
    pg10 = await gate_lifecycle(POSTGRES_URL, args.ops, concurrency=10)
    print(f"PostgreSQL at 10 concurrent calls: {pg10:,.0f} operations/s; asyncpg pool: {pool10:,.0f}/s; "
          f"ratio {pg10 / pool10:.2f} (target ≥ 800/s)")
    for pause in (args.pause, 0.0):
        latencies: list[float] = []
        rate = await gate_lifecycle(POSTGRES_URL, max(args.ops, 1000), concurrency=100, latencies=latencies,
                                    pause_secs=pause)
        latencies.sort()
        load = (f"each writing every {pause:g} s between turns" if pause
                else "each writing back to back (saturation)")
        print(f"PostgreSQL at 100 concurrent calls, {load}: {rate:,.0f} operations/s, "
              f"p50 {latencies[len(latencies) // 2] * 1e3:.1f} ms, "
              f"p99 {latencies[int(len(latencies) * 0.99)] * 1e3:.1f} ms (target p99 ≤ 100 ms)")
    empty, full = await grown_cost(POSTGRES_URL, min(args.ops, 500), args.grown)
    print(f"PostgreSQL write with {args.grown:,} records in the ledger: {full * 1e3:.2f} ms vs "
          f"{empty * 1e3:.2f} ms empty ({full / empty:.2f}x)")
    held, first_min, first_median = await connections_for_50_calls()
    print(f"50 concurrent calls, each with its own gate and ledger: {held} PostgreSQL connections held "
          f"(one shared pool per URL); first write {first_median * 1e3:.1f} ms median, {first_min * 1e3:.1f} ms min")


if __name__ == "__main__":
    asyncio.run(main())
