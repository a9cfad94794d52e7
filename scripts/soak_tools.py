"""Seeded fault-schedule soak of the tool gate on a real ledger, against a backend that does not dedupe.

Each schedule is one call (its own session id) whose writes run in worker
processes, each with its own gate on the same ledger. Steps, drawn from a
seeded generator: calls, duplicates in one turn (concurrent) and across turns,
the same request at 2–4 processes at once, handlers that raise
before and after the backend applied, ``{"error": ...}`` results, refusals,
timeouts with late replies, lost replies, hangs, cancellations by barge-in,
in-process restarts (a new gate on the same ledger), and SIGKILL of a worker
process at random points with a restart on the same ledger.

The backend counts every application (a SQLite table, one row per
application, no uniqueness). Afterwards every call is reconciled by a fresh
gate, 2–4 outbox publishers drain the events (with delivery failures, lost
acknowledgements and publisher crashes) into a consumer whose effect is a
row written in the consumer's transaction, and the soak prints, per database:

* logical operations applied twice (counted at the backend by call and request),
* applied but not ``succeeded`` in the ledger after reconciliation,
* records left ``executing``,
* events lost, and events delivered twice to the consumer's effect.

All must be 0.

Usage: .venv/bin/python scripts/soak_tools.py [--schedules N] [--database sqlite|postgres|both] [--seed S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TOOL = "charge"
TENANT = "soak"
TIMEOUT_SECS = 0.05
LATE_REPLY_SECS = 0.25
LEASE_SECS = 0.6
SWEEP_SECS = 0.5
ORPHAN_SECS = 3.0  # a record executing with no live handler longer than this (owner grace + sweep) is a fault
REQUESTS = [{"order_id": "#W1", "amount_usd": 45}, {"order_id": "#W1", "amount_usd": 20},
            {"order_id": "#W2", "amount_usd": 45}]
FAULTS = ["ok", "ok", "ok", "raise_before", "raise_after", "error", "refuse", "late", "lost", "hang", "wire", "thread",
          "swallow"]

# -- the backend: counts every application, never dedupes, refuses a voided attempt ----------


def backend_create(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE applications (session TEXT, request INTEGER, key TEXT, fencing TEXT, pid INTEGER, "
                   "at REAL)")
        db.execute("CREATE TABLE voided (fencing TEXT PRIMARY KEY, at REAL)")


def backend_apply(path: str, session: str, request: int, key: str, fencing: str) -> bool:
    """Apply a charge unless its attempt was voided (then ``False``: the request is refused)."""
    with contextlib.closing(sqlite3.connect(path, timeout=60, isolation_level=None)) as db:
        db.execute("BEGIN IMMEDIATE")
        if db.execute("SELECT 1 FROM voided WHERE fencing = ?", (fencing,)).fetchone():
            db.execute("ROLLBACK")
            return False
        db.execute("INSERT INTO applications VALUES (?, ?, ?, ?, ?, ?)",
                   (session, request, key, fencing, os.getpid(), time.time()))
        db.execute("COMMIT")
        return True


def backend_lookup_or_void(path: str, key: str, fencing: str) -> bool:
    """Whether the key was applied; if not, void the attempt (atomically) so a late request of it is refused."""
    with contextlib.closing(sqlite3.connect(path, timeout=60, isolation_level=None)) as db:
        db.execute("BEGIN IMMEDIATE")
        if db.execute("SELECT 1 FROM applications WHERE key = ?", (key,)).fetchone():
            db.execute("ROLLBACK")
            return True
        db.execute("INSERT OR IGNORE INTO voided VALUES (?, ?)", (fencing, time.time()))
        db.execute("COMMIT")
        return False


def make_reconciler(path: str) -> Any:
    """The lookup reconciler in its fenced form: applied → succeeded; else void this attempt → failed."""
    from pipecat_harness.tools import OperationStatus, Reconciliation

    async def reconcile(record: Any) -> Any:
        if await asyncio.to_thread(backend_lookup_or_void, path, record.idempotency_key, record.fencing_key):
            return Reconciliation(OperationStatus.SUCCEEDED, result={"status": "charged"})
        return Reconciliation(OperationStatus.FAILED, error="voided: the backend has no record of it",
                              voided=record.attempt)

    return reconcile


# -- a worker process: gates on the shared ledger, driven over stdin/stdout -------------------


async def worker_main(ledger_url: str, prefix: str, backend: str, skew: str = "0") -> None:
    from pipecat_harness.tools import OperationLedger, OperationRefused, ToolGate, current_operation
    from pipecat_harness.tools.store_calls import retrying

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    ledger = OperationLedger(ledger_url, table_prefix=prefix)
    ledger.local_clock = lambda: time.time() + float(skew)  # this host's clock is off; leases use the ledger's
    reconciler = make_reconciler(backend)
    gates: dict[str, Any] = {}
    tasks: dict[str, asyncio.Task[None]] = {}
    live: Counter[str] = Counter()  # idempotency keys whose handler (or its thread) is running here
    began: dict[str, str] = {}  # call → fencing key of the attempt its handler began
    wire: dict[str, asyncio.Future[bool]] = {}
    failures: Counter[str] = Counter()

    def send(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def gate_for(session: str) -> Any:
        if session not in gates:
            gate = gates[session] = ToolGate(write_tools={TOOL}, ledger=ledger, tenant=TENANT, session_id=session,
                                             timeout_secs=TIMEOUT_SECS, late_reply_secs=LATE_REPLY_SECS,
                                             reconciler=reconciler)
            gate.writes.lease_secs = LEASE_SECS  # short, so that paused owners outlive their leases
        return gates[session]

    def handler(cid: str, session: str, request: int, fault: str) -> Any:
        async def run(arguments: Any) -> Any:
            operation = current_operation()
            key, fencing = operation.idempotency_key, operation.fencing_key
            began[cid] = fencing
            live[key] += 1
            try:
                return await body(key, fencing)
            finally:
                live[key] -= 1
                if not live[key]:
                    del live[key]

        def apply(key: str, fencing: str) -> None:
            if not backend_apply(backend, session, request, key, fencing):
                raise OperationRefused("the backend voided this attempt")

        async def body(key: str, fencing: str) -> Any:
            if fault == "raise_before":
                raise ConnectionError("connection refused")
            if fault == "error":
                return {"error": "card declined"}
            if fault == "refuse":
                raise OperationRefused("card declined")
            if fault == "wire":  # the request goes out and lands later, whatever happens to this process
                landed = wire[cid] = loop.create_future()
                send({"wire": cid, "session": session, "request": request, "key": key, "fencing": fencing,
                      "delay": TIMEOUT_SECS * 3})
                send({"reached": cid})
                try:
                    ok = await asyncio.wait_for(landed, 10)
                except TimeoutError:
                    send({"stuck": cid, "fault": fault})
                    raise
                if not ok:
                    raise OperationRefused("the backend voided this attempt")
                return {"status": "charged"}
            if fault == "thread":  # a synchronous SDK in a thread, landing after the deadline
                def blocking() -> None:
                    time.sleep(TIMEOUT_SECS * 3)
                    apply(key, fencing)
                await asyncio.to_thread(blocking)
                return {"status": "charged"}
            if fault == "swallow":  # a handler that swallows a cancellation and charges anyway
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(TIMEOUT_SECS * 2)
                apply(key, fencing)
                return {"status": "charged"}
            if fault in ("late", "hang", "slow"):
                await asyncio.sleep({"late": TIMEOUT_SECS * 2.5, "hang": LATE_REPLY_SECS * 4,
                                     "slow": TIMEOUT_SECS * 0.5}[fault])
            if fault == "block_before":
                send({"reached": cid})
                await asyncio.Event().wait()
            apply(key, fencing)
            if fault == "block_after":
                send({"reached": cid})
                await asyncio.Event().wait()
            if fault == "raise_after":
                raise ConnectionResetError("connection reset by peer")
            if fault == "lost":
                raise TimeoutError("read timed out")
            return {"status": "charged"}

        return run

    async def call(cid: str, session: str, turn: int, request: int, fault: str) -> None:
        gate = gate_for(session)
        gate.new_turn(turn)
        try:
            result = await gate.call(TOOL, REQUESTS[request], handler(cid, session, request, fault))
            send({"done": cid, "status": str(result.status), "kind": result.reason_kind,
                  "began": began.pop(cid, None)})
        except asyncio.CancelledError:
            send({"done": cid, "status": "cancelled", "began": began.pop(cid, None)})
        except BaseException as exc:  # the soak counts anything escaping ToolGate.call
            send({"done": cid, "status": "exception", "error": f"{type(exc).__name__}: {exc}"})

    async def sweeper() -> None:  # what the Pipecat control's sweeper does, for every call of this worker
        while True:
            await asyncio.sleep(SWEEP_SECS)
            try:
                await ledger.recover(TENANT, grace_secs=TIMEOUT_SECS)
                for gate in list(gates.values()):
                    await gate.reconcile_pending()
            except Exception as exc:  # an outage: the next sweep tries again
                failures[type(exc).__name__] += 1

    def dump() -> None:  # kill -USR1 <worker>: where every task of this worker waits, and why sweeps failed
        print(f"worker {os.getpid()}: sweeps failed {dict(failures)}", file=sys.stderr)
        for task in asyncio.all_tasks():
            frames: list[str] = []
            awaited: Any = task.get_coro()
            while awaited is not None and hasattr(awaited, "cr_frame"):
                if awaited.cr_frame is not None:
                    frames.append(f"{awaited.cr_code.co_name}:{awaited.cr_frame.f_lineno}")
                awaited = awaited.cr_await
            print(f"  task {' > '.join(frames)} waits on {awaited!r}"[:400], file=sys.stderr)

    loop.add_signal_handler(signal.SIGUSR1, dump)
    # A restart during a database outage waits for the database (a refused or a dropped connection alike).
    await retrying(ledger.create_tables, within_secs=30)
    sweeping = asyncio.create_task(sweeper())
    send({"ready": os.getpid()})
    while line := await reader.readline():
        command = json.loads(line)
        kind = command["kind"]
        if kind == "call":
            cid = command["cid"]
            task = tasks[cid] = asyncio.create_task(
                call(cid, command["session"], command["turn"], command["request"], command["fault"]))
            # Cancelled before it started, the call never runs its body: answer for it.
            task.add_done_callback(lambda t, cid=cid: t.cancelled() and send({"done": cid, "status": "cancelled"}))
        elif kind == "cancel":
            task = tasks.get(command["cid"])
            if task is not None:
                task.cancel()
        elif kind == "landed":
            future = wire.pop(command["cid"], None)
            if future is not None and not future.done():
                future.set_result(command["ok"])
        elif kind == "probe":
            send({"probe": command["n"], "keys": list(live)})
        elif kind == "restart":
            gate = gates.pop(command["session"], None)
            if gate is not None:
                await gate.close()
            send({"restarted": command["session"]})
        elif kind == "finish":
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            tasks.clear()
            for gate in gates.values():
                await gate.writes.late_replies.wait()
            send({"finished": True})
    sweeping.cancel()
    for gate in gates.values():
        await gate.close()
        await gate.writes.late_replies.wait()
    await ledger.close()


# -- the parent: schedules, faults, checks ---------------------------------------------------


class Worker:
    """A worker process and the futures of its outstanding commands."""

    def __init__(self, ledger_url: str, prefix: str, backend: Path, skew: float = 0.0) -> None:
        self.args = [sys.executable, str(Path(__file__).resolve()), "--worker", ledger_url, prefix, str(backend),
                     str(skew)]
        self.backend = str(backend)
        self.network: set[asyncio.Task[None]] = set()
        self.landed_after_death = 0
        self.stuck = 0
        self.paused = False
        self.proc: asyncio.subprocess.Process | None = None
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.reader: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        self.restarting = asyncio.Lock()

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = await asyncio.create_subprocess_exec(*self.args, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, env=env,
                                                         limit=1 << 20)
        ready = await self.proc.stdout.readline()  # type: ignore[union-attr]
        if not ready:
            raise RuntimeError("a soak worker failed to start")
        self.reader = asyncio.create_task(self._read())
        self.ready.set()

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            if "stuck" in message:
                self.stuck += 1
            if "wire" in message:
                task = asyncio.create_task(self._land(message, self.proc))
                self.network.add(task)
                task.add_done_callback(self.network.discard)
            for kind in ("done", "reached", "restarted", "finished", "probe"):
                if kind in message:
                    future = self.waiting.pop(f"{kind}:{message[kind]}", None)
                    if future is not None and not future.done():
                        future.set_result(message)
        for future in self.waiting.values():  # the process died
            if not future.done():
                future.set_result({"status": "killed"})
        self.waiting.clear()

    async def _land(self, message: dict[str, Any], proc: Any) -> None:
        """The network: the request reaches the backend after its delay, whether or not its sender still lives."""
        await asyncio.sleep(message["delay"])
        ok = await asyncio.to_thread(backend_apply, self.backend, message["session"], message["request"],
                                     message["key"], message["fencing"])
        if proc is self.proc and proc.returncode is None:
            with contextlib.suppress(Exception):
                await self.send(kind="landed", cid=message["wire"], ok=ok)
        else:  # applied, or refused because its attempt was voided meanwhile
            self.landed_after_death += 1

    async def pause(self, secs: float) -> None:
        """Freeze the process (a GC pause, a VM freeze) past its leases."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.paused = True
        try:
            self.proc.send_signal(signal.SIGSTOP)
            await asyncio.sleep(secs)
        finally:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
            self.paused = False

    def expect(self, kind: str, ident: Any) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[f"{kind}:{ident}"] = future
        return future

    async def send(self, **command: Any) -> None:
        await self.ready.wait()  # never to a process that is being killed and restarted
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())

    async def kill(self) -> None:
        assert self.proc is not None
        self.ready.clear()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()  # reaped: its pid is gone, so its leases end
        if self.reader is not None:
            await self.reader

    async def stop(self) -> None:
        while self.network:
            await asyncio.gather(*list(self.network), return_exceptions=True)
        if self.proc is not None and self.proc.returncode is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            await self.proc.wait()
        if self.reader is not None:
            await self.reader


@dataclass
class Figures:
    """What one database's soak measured."""

    schedules: int = 0
    steps: int = 0
    kills: int = 0
    multi_process: int = 0
    applied_twice: int = 0
    applied_not_succeeded: int = 0
    succeeded_not_applied: int = 0
    left_executing: int = 0
    live_orphans: int = 0
    live_checks: int = 0
    reported_not_executed: int = 0
    outages: int = 0
    pauses: int = 0
    landed_after_death: int = 0
    stuck: int = 0
    dead_owner_seen: int = 0
    began: list[tuple[str, str]] = field(default_factory=list)
    events: int = 0
    events_lost: int = 0
    delivered_twice: int = 0
    exceptions: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.applied_twice or self.applied_not_succeeded or self.succeeded_not_applied
                    or self.left_executing or self.live_orphans or self.reported_not_executed
                    or self.events_lost or self.delivered_twice or self.exceptions)


async def run_schedule(rng: random.Random, session: str, workers: list[Worker], figures: Figures,
                       allow_kill: bool, outage: Any = None) -> None:
    turn = 1
    pool = workers[:rng.randint(1, len(workers))]
    if len(pool) > 1:
        figures.multi_process += 1

    async def call(worker: Worker, request: int, fault: str, *, cancel_after: float | None = None) -> str:
        cid = uuid.uuid4().hex[:10]
        done = worker.expect("done", cid)
        await worker.send(kind="call", cid=cid, session=session, turn=turn, request=request, fault=fault)
        if cancel_after is not None:
            await asyncio.sleep(cancel_after)
            await worker.send(kind="cancel", cid=cid)
        result = await done
        if result["status"] == "exception":
            figures.exceptions.append(result.get("error", "?"))
        if result.get("began"):
            figures.began.append((result["began"], str(result["status"])))
        return str(result["status"])

    for _ in range(rng.randint(6, 12)):
        figures.steps += 1
        step = rng.random()
        request = rng.randrange(len(REQUESTS))
        worker = rng.choice(pool)
        if step < 0.40:
            await call(worker, request, rng.choice(FAULTS))
        elif step < 0.52:  # the same request twice at once, in one turn (one reply with two calls)
            await asyncio.gather(call(worker, request, rng.choice(FAULTS)), call(worker, request, "ok"))
        elif step < 0.62 and len(pool) > 1:  # the same request at every process at once
            await asyncio.gather(*(call(w, request, rng.choice(["ok", "slow", "late", "raise_after"]))
                                   for w in pool))
        elif step < 0.72:
            turn += 1
        elif step < 0.80:  # barge-in: the call is cancelled while its handler runs
            await call(worker, request, rng.choice(["late", "slow", "hang", "wire", "thread", "swallow"]),
                       cancel_after=rng.random() * 0.06)
        elif step < 0.87:  # in-process restart: a new gate on the same ledger, in a later turn
            restarted = worker.expect("restarted", session)
            await worker.send(kind="restart", session=session)
            await restarted
            turn += 1
        elif step < 0.93 and allow_kill:
            await sigkill(rng, worker, session, turn, request, figures)
            turn += 1
        elif step < 0.96 and outage is not None:  # the database refuses connections (or is locked) for a while
            await asyncio.gather(outage(figures, rng.uniform(0.5, 1.2)),
                                 call(worker, request, rng.choice(FAULTS)), call(worker, request, "ok"))
        elif step < 1.0 and len(pool) > 1 and not worker.paused:  # the owner freezes past its lease
            other = rng.choice([w for w in pool if w is not worker])

            async def meanwhile(other: Worker = other, request: int = request) -> None:
                await asyncio.sleep(LEASE_SECS + 0.2)
                await call(other, request, rng.choice(["ok", "wire", "slow"]))

            figures.pauses += 1
            await asyncio.gather(call(worker, request, rng.choice(["slow", "wire", "late", "thread"])),
                                 worker.pause(LEASE_SECS + 0.5), meanwhile())
        else:
            await call(worker, request, "ok")


async def sigkill(rng: random.Random, worker: Worker, session: str, turn: int, request: int,
                  figures: Figures) -> None:
    """Kill the worker inside a handler (before or after it applied) or at a random moment, then restart it."""
    cid = uuid.uuid4().hex[:10]
    fault = rng.choice(["block_before", "block_after", "ok", "slow", "wire", "wire"])
    reached = worker.expect("reached", cid)
    done = worker.expect("done", cid)
    await worker.send(kind="call", cid=cid, session=session, turn=turn, request=request, fault=fault)
    if fault.startswith("block") or fault == "wire":  # killed inside the handler, or with its request on the wire
        await asyncio.wait({reached, done}, timeout=10)
    else:
        await asyncio.sleep(rng.random() * 0.02)  # anywhere: in the gate's own ledger writes, or the handler
    async with worker.restarting:  # two schedules killing the same process restart it once
        if worker.proc is not None and worker.proc.returncode is None:
            await worker.kill()
            figures.kills += 1
            await worker.start()


async def check(ledger_url: str, prefix: str, backend: Path, sessions: list[str], figures: Figures) -> None:
    from pipecat_harness.tools import OperationLedger, OperationStatus, ToolGate, request_hash
    from pipecat_harness.tools.identity import OperationIdentity

    ledger = OperationLedger(ledger_url, table_prefix=prefix)
    reconciler = make_reconciler(str(backend))
    try:
        for session in sessions:  # what a restarted call does first: recover, then reconcile
            gate = ToolGate(write_tools={TOOL}, ledger=ledger, tenant=TENANT, session_id=session,
                            reconciler=reconciler)
            await gate.reconcile_pending()
            await gate.close()
        with contextlib.closing(sqlite3.connect(backend, timeout=60)) as db:
            rows = list(db.execute("SELECT session, request, fencing FROM applications"))
        applied = Counter((s, r) for s, r, _ in rows)
        fenced = {f for _, _, f in rows}
        figures.reported_not_executed = sum(status == "not_executed" and fencing in fenced
                                            for fencing, status in figures.began)
        records = {r.idempotency_key: r for r in await ledger.records(TENANT)}
        figures.left_executing = sum(r.status == OperationStatus.EXECUTING for r in records.values())
        for session in sessions:
            for index, request in enumerate(REQUESTS):
                key = OperationIdentity(TENANT, session, TOOL, request_hash(TOOL, request)).key
                record = records.get(key)
                times = applied.get((session, index), 0)
                figures.applied_twice += times > 1
                succeeded = record is not None and record.status == OperationStatus.SUCCEEDED
                figures.applied_not_succeeded += times > 0 and not succeeded
                if times > 0 and not succeeded:
                    print(f"  applied but {record and record.status}: {record}", file=sys.stderr)
                    explain_application(backend, session, index, key)
                figures.succeeded_not_applied += succeeded and times == 0
        await drain_events(ledger, figures)
    finally:
        await ledger.close()


def explain_application(backend: str | Path, session: str, request: int, key: str) -> None:
    """For a record the check refused: which attempts the backend applied and voided, and when."""
    with contextlib.closing(sqlite3.connect(backend, timeout=60)) as db:
        applied = list(db.execute("SELECT fencing, pid, at FROM applications WHERE session = ? AND request = ?",
                                  (session, request)))
        voided = list(db.execute("SELECT fencing, at FROM voided WHERE fencing LIKE ? ESCAPE '!'",
                                 (key.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "#%",)))
    for fencing, pid, at in applied:
        print(f"    applied {fencing} by pid {pid} at {at:.3f}", file=sys.stderr)
    for fencing, at in voided:
        print(f"    voided {fencing} at {at:.3f}", file=sys.stderr)


async def drain_events(ledger: Any, figures: Figures) -> None:
    """2–4 publishers with faults drain the outbox into a consumer whose effect commits with its mark."""
    from sqlalchemy import Column, MetaData, String, Table, func, select

    from pipecat_harness.tools import OperationLedger, OutboxConsumer, OutboxPublisher

    effects = Table(f"{ledger.tables.outbox.name}_effects", MetaData(), Column("event_id", String(36)))
    async with ledger.engine.begin() as conn:
        await conn.run_sync(effects.metadata.create_all)

    async def effect(event: Any, conn: Any) -> None:
        await conn.execute(effects.insert().values(event_id=event.event_id))

    rng = random.Random(len(figures.exceptions) + figures.steps)
    consumer = OutboxConsumer(ledger, "soak-effects", effect, in_transaction=True)

    async def flaky(event: Any) -> None:
        roll = rng.random()
        if roll < 0.1:
            raise ConnectionError("bus unavailable")
        await consumer(event)
        if roll > 0.9:
            raise TimeoutError("acknowledgement lost")  # delivered, but the publisher does not know

    publishers = []
    for _ in range(rng.randint(2, 4)):  # each with its own engine, as separate processes would have
        other = OperationLedger(str(ledger.engine.url.render_as_string(hide_password=False)),
                                table_prefix=ledger.tables.outbox.name[: -len("outbox")])
        publishers.append(OutboxPublisher(other, flaky, retry_delay_secs=0.0, claim_secs=0.3, max_attempts=1000,
                                          batch_size=50))
    crash = asyncio.create_task(publishers[0].drain(max_passes=1))
    await asyncio.sleep(0)
    crash.cancel()  # a publisher dies after claiming: its rows come back when its lease ends
    with contextlib.suppress(asyncio.CancelledError):
        await crash
    for _ in range(200):
        await asyncio.gather(*(p.drain(max_passes=50) for p in publishers[1:]))
        if not await publishers[1].pending():
            break
        await asyncio.sleep(0.1)
    for publisher in publishers:
        await publisher.ledger.close()
    outbox = ledger.tables.outbox
    async with ledger.engine.connect() as conn:
        ids = {row[0] for row in await conn.execute(select(outbox.c.event_id))}
        seen = Counter(dict((await conn.execute(
            select(effects.c.event_id, func.count()).group_by(effects.c.event_id))).all()))
    figures.events = len(ids)
    figures.events_lost = len(ids - set(seen))
    figures.delivered_twice = sum(1 for n in seen.values() if n > 1)


class RefusingProxy:
    """A TCP proxy in front of PostgreSQL that can refuse connections (and drop open ones) for a while."""

    def __init__(self, port: int = 5432) -> None:
        self.upstream = port
        self.port = 0
        self.server: asyncio.AbstractServer | None = None
        self.open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            client_w.close()
            return
        self.open |= {client_w, server_w}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))
        self.open -= {client_w, server_w}

    async def refuse(self, secs: float) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.open):
            writer.transport.abort()
        await asyncio.sleep(secs)
        await self.start()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.open):
            writer.transport.abort()


def hold_sqlite_lock(path: str, secs: float) -> None:
    """Another process takes the ledger's write lock and keeps it (a busy database)."""
    with contextlib.closing(sqlite3.connect(path, timeout=60, isolation_level=None)) as db:
        db.execute("BEGIN IMMEDIATE")
        time.sleep(secs)
        db.execute("COMMIT")


def explain_orphan(record: Any, now: float, workers: list[Worker]) -> None:
    """For a record executing with no live handler: its fields, and where its owner's tasks wait."""
    print(f"  orphan {record.idempotency_key} attempt {record.attempt} version {record.version} owner "
          f"{record.owner} lease {record.lease_until - now:+.2f} s updated {record.updated_at - now:+.2f} s",
          file=sys.stderr)
    for worker in workers:  # every worker's sweeper could have recovered it
        if worker.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                worker.proc.send_signal(signal.SIGUSR1)


async def watch_live(ledger: Any, workers: list[Worker], figures: Figures, orphans: set[str],
                     reachable_since: Callable[[], float | None]) -> None:
    """While workers run: an ``executing`` record with no live handler for long is counted (once).

    Long means for ``ORPHAN_SECS`` with the database reachable throughout (``reachable_since``: when the last
    outage ended, ``None`` during one): while it refuses, nobody can settle anything.
    """
    from pipecat_harness.tools import OperationStatus
    from pipecat_harness.tools.owners import owner_gone

    first_seen: dict[str, float] = {}
    probe = 0

    async def live_keys() -> set[str] | None:
        nonlocal probe
        probe += 1
        alive = [w for w in workers if w.ready.is_set() and not w.paused]
        if len(alive) < len(workers):
            return None  # a worker is restarting or frozen: its handlers cannot be asked
        answers = [w.expect("probe", probe) for w in alive]
        for worker in alive:
            await worker.send(kind="probe", n=probe)
        try:
            # (return_exceptions: a reply cancelled by a worker's restart is not left unretrieved)
            replies = await asyncio.wait_for(asyncio.gather(*answers, return_exceptions=True), 2.0)
        except TimeoutError:
            return None
        answered = [reply for reply in replies if isinstance(reply, dict)]
        if len(answered) < len(replies):
            return None  # a worker went away while answering
        return {key for reply in answered for key in reply.get("keys", [])}

    while True:
        await asyncio.sleep(0.3)
        try:
            before = await live_keys()
            executing = await ledger.find(TENANT, OperationStatus.EXECUTING)
            after = await live_keys()
        except Exception:
            continue
        if before is None or after is None:
            continue
        figures.live_checks += 1
        now = time.monotonic()
        # Under a live owner with no handler of it running: the fault. A killed owner's record waits for the
        # grace (its request may still land) and for a sweeper; those are checked when the run ends.
        idle = [r for r in executing if r.idempotency_key not in before | after]
        current = {r.idempotency_key for r in idle if not owner_gone(r.owner)}
        figures.dead_owner_seen = max(figures.dead_owner_seen, len(idle) - len(current))
        for key in list(first_seen):
            if key not in current:
                del first_seen[key]
        reachable = reachable_since()
        for key in current:
            # A settle may be under way or retried, a dead owner's record waits for its grace and the sweeper.
            since = first_seen.setdefault(key, now)
            if reachable is None:
                continue
            if now - max(since, reachable) > ORPHAN_SECS and key not in orphans:
                orphans.add(key)
                figures.live_orphans += 1
                explain_orphan(next(r for r in idle if r.idempotency_key == key), ledger.clock(), workers)


async def soak(database: str, schedules: int, seed: int, workdir: Path) -> Figures | None:
    from pipecat_harness.tools import OperationLedger

    prefix = f"soak{uuid.uuid4().hex[:8]}_"
    url = POSTGRES_URL if database == "postgres" else f"sqlite+aiosqlite:///{workdir / f'ledger-{prefix}.db'}"
    ledger = OperationLedger(url, table_prefix=prefix)
    try:
        await ledger.create_tables()
    except Exception as exc:
        print(f"{database}: skipped, not reachable ({type(exc).__name__}: {exc})")
        await ledger.close()
        return None
    backend = workdir / f"backend-{prefix}.db"
    backend_create(backend)
    proxy = RefusingProxy() if database == "postgres" else None
    worker_url = url
    if proxy is not None:
        await proxy.start()
        worker_url = url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    # Clocks disagree: the workers' hosts are off by up to 20 s either way (leases use the ledger's clock).
    skews = [0.0, -20.0, 20.0, -7.0]
    workers = [Worker(worker_url, prefix, backend, skews[n]) for n in range(4)]
    await asyncio.gather(*(w.start() for w in workers))
    figures = Figures()
    sessions: list[str] = []
    orphans: set[str] = set()
    out = asyncio.Lock()

    outage_ended = [0.0]

    async def outage(figures: Figures, secs: float) -> None:
        if out.locked():
            return
        async with out:
            figures.outages += 1
            try:
                if proxy is not None:
                    await proxy.refuse(secs)
                else:
                    await asyncio.to_thread(hold_sqlite_lock, url.split("///", 1)[1], secs)
            finally:
                outage_ended[0] = time.monotonic()

    def reachable_since() -> float | None:
        return None if out.locked() else outage_ended[0]

    started = time.perf_counter()
    live = asyncio.create_task(watch_live(ledger, workers, figures, orphans, reachable_since))
    try:
        batch = 50
        for first in range(0, schedules, batch):
            names = [f"c{seed}-{n}" for n in range(first, min(first + batch, schedules))]
            await asyncio.gather(*(
                run_schedule(random.Random(f"{seed}:{name}"), name, workers, figures,
                             allow_kill=i < 3, outage=outage)
                for i, name in enumerate(names)))
            for worker in workers:
                finished = worker.expect("finished", True)
                await worker.send(kind="finish")
                await finished
            sessions.extend(names)
            figures.schedules += len(names)
        # The check is what a restart on the same ledger does: the old processes are gone first (a live
        # process's unexpired lease rightly keeps its records from being settled under it).
        live.cancel()
        for worker in workers:
            await worker.stop()
            figures.landed_after_death += worker.landed_after_death
            figures.stuck += worker.stuck
        await check(url, prefix, backend, sessions, figures)
    finally:
        live.cancel()
        for worker in workers:
            await worker.stop()
        if proxy is not None:
            await proxy.close()
        with contextlib.suppress(Exception):
            await ledger.drop_tables()
        await ledger.close()
    elapsed = time.perf_counter() - started
    print(f"{database:<10} {figures.schedules} schedules, {figures.steps} steps, {figures.kills} SIGKILLs, "
          f"{figures.multi_process} with 2-4 processes, {elapsed:.0f} s")
    print(f"  logical operations applied twice:                      {figures.applied_twice}")
    print(f"  applied but not succeeded after reconciliation:        {figures.applied_not_succeeded}")
    print(f"  succeeded in the ledger but never applied:             {figures.succeeded_not_applied}")
    print(f"  {figures.outages} database outages, {figures.pauses} paused owners, "
          f"{figures.landed_after_death} requests landed after their sender was killed, "
          f"{figures.live_checks} live checks, {figures.stuck} wire replies never received")
    print(f"  applied but reported not executed:                     {figures.reported_not_executed}")
    print(f"  executing under a live owner with no live handler, seen while running: {figures.live_orphans} "
          f"(most records of killed owners awaiting their grace and a sweeper at once: {figures.dead_owner_seen})")
    print(f"  records left executing:                                {figures.left_executing}")
    print(f"  exceptions out of ToolGate.call:                       {len(figures.exceptions)}"
          + (f" (first: {figures.exceptions[0]})" if figures.exceptions else ""))
    print(f"  events lost:                                           {figures.events_lost} of {figures.events}")
    print(f"  events delivered twice to the consumer's effect:       {figures.delivered_twice}")
    return figures


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1000, help="schedules per database")
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    databases = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    clean = True
    with tempfile.TemporaryDirectory() as tmp:
        for database in databases:
            figures = await soak(database, args.schedules, args.seed, Path(tmp))
            clean = clean and (figures is None or figures.clean)
    print("all zero" if clean else "VIOLATIONS FOUND")
    return 0 if clean else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        asyncio.run(worker_main(*sys.argv[2:6]))
    else:
        sys.exit(asyncio.run(main()))
