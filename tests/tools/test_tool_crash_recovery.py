"""A worker SIGKILLed mid-write, restarted on the same ledger: the write is applied exactly once.

The backend is a SQLite table that records every application and does not
dedupe; the reconciler asks it whether the operation's key was applied.
"""

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipecat_harness.tools import OperationLedger, OperationStatus, Reconciliation, ToolGate, current_operation

REFUND = {"order_id": "#W1", "amount_usd": 45}

WORKER = textwrap.dedent("""
    import asyncio, sqlite3, sys, time
    from pipecat_harness.tools import OperationLedger, ToolGate, current_operation

    ledger_url, backend, stage = sys.argv[1], sys.argv[2], sys.argv[3]

    async def refund(args):
        if stage == "after":
            with sqlite3.connect(backend) as db:
                db.execute("INSERT INTO applications VALUES (?)", (current_operation().idempotency_key,))
        with sqlite3.connect(backend) as db:
            db.execute("INSERT INTO progress VALUES ('in handler')")
        time.sleep(60)  # killed here

    async def main():
        ledger = OperationLedger(ledger_url)
        await ledger.create_tables()
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call-1", timeout_secs=120)
        gate.new_turn(1)
        await gate.call("issue_refund", {"order_id": "#W1", "amount_usd": 45}, refund)

    asyncio.run(main())
""")


def _backend(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE applications (key TEXT)")
        db.execute("CREATE TABLE progress (what TEXT)")


def _applications(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT key FROM applications")]


def _kill_worker_in_handler(ledger_url: str, backend: Path, stage: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, ledger_url, str(backend), stage], env=env)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            with sqlite3.connect(backend) as db:
                if db.execute("SELECT count(*) FROM progress").fetchone()[0]:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the worker never reached its handler")
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()


@pytest.mark.parametrize("stage", ["before", "after"])
async def test_sigkill_during_a_write_then_restart_applies_it_once(tmp_path, stage):
    ledger_url = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
    backend = tmp_path / "backend.db"
    _backend(backend)
    await asyncio.to_thread(_kill_worker_in_handler, ledger_url, backend, stage)

    async def refund(args):
        with sqlite3.connect(backend) as db:
            db.execute("INSERT INTO applications VALUES (?)", (current_operation().idempotency_key,))
        return {"status": "refunded"}

    async def reconciler(record):
        if record.idempotency_key in _applications(backend):
            return Reconciliation(OperationStatus.SUCCEEDED, result={"status": "refunded"})
        # The backend voids the attempt: a request of it still on the wire would now be refused.
        return Reconciliation(OperationStatus.FAILED, error="no such refund", voided=record.attempt)

    ledger = OperationLedger(ledger_url)
    try:
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call-1", reconciler=reconciler,
                        timeout_secs=0.3)
        [left] = await ledger.records()
        assert left.status == OperationStatus.EXECUTING  # what the dead worker left
        gate.new_turn(2)  # the restarted process resumes in a later turn
        # A request the dead worker had on the wire may land for its timeout after the death was seen.
        assert await gate.reconcile_pending() == []
        assert (await gate.call("issue_refund", REFUND, refund)).reason_kind == "in_flight"
        await asyncio.sleep(0.35)
        settled = await gate.reconcile_pending()
        assert [r.status for r in settled] == [OperationStatus.SUCCEEDED if stage == "after"
                                               else OperationStatus.FAILED]
        result = await gate.call("issue_refund", REFUND, refund)
        again = await gate.call("issue_refund", REFUND, refund)
        assert len(_applications(backend)) == 1
        assert {result.status, again.status} <= {"executed", "not_executed"}
        assert [r.status for r in await ledger.records()] == [OperationStatus.SUCCEEDED]
    finally:
        await ledger.close()


async def test_a_restart_without_a_reconciler_never_re_executes_an_unknown_write(tmp_path):
    ledger_url = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
    backend = tmp_path / "backend.db"
    _backend(backend)
    await asyncio.to_thread(_kill_worker_in_handler, ledger_url, backend, "after")

    async def refund(args):
        with sqlite3.connect(backend) as db:
            db.execute("INSERT INTO applications VALUES (?)", (current_operation().idempotency_key,))
        return {"status": "refunded"}

    ledger = OperationLedger(ledger_url)
    try:
        gate = ToolGate(write_tools={"issue_refund"}, ledger=ledger, session_id="call-1", timeout_secs=0.2)
        assert (await gate.call("issue_refund", REFUND, refund)).reason_kind == "in_flight"
        await asyncio.sleep(0.25)  # the dead worker's request has had its time to land
        for turn in (2, 3):
            gate.new_turn(turn)
            assert (await gate.call("issue_refund", REFUND, refund)).status == "outcome_unknown"
        assert len(_applications(backend)) == 1
        assert [r.status for r in await ledger.records()] == [OperationStatus.OUTCOME_UNKNOWN]
    finally:
        await ledger.close()
