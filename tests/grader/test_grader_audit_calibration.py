"""`grader calibrate`: operators' reviews of sampled audited turns score the grader, per tenant and week."""

import argparse
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipecat_harness.grader import command
from pipecat_harness.grader.audit import AuditRow, AuditStore
from pipecat_harness.grader.audit_calibration import calibrate

WEEKS = (datetime(2026, 5, 12, 10, tzinfo=UTC).timestamp(), datetime(2026, 5, 19, 10, tzinfo=UTC).timestamp())


async def seed(store: AuditStore) -> None:
    """Per tenant and week: 40 unflagged rows, 10 flags; operators reviewed every flag and 10 unflagged rows.

    Flags: 8 acknowledged (right), 2 overridden (false flags). Unflagged reviewed: 9 acknowledged, 1 escalated
    (a claim the grader missed). Flags at confidence 0.95 are all right; the two false flags said 0.75.
    """
    for tenant in ("sparkle", "acme"):
        for week, stamp in enumerate(WEEKS):
            rows = []
            for i in range(50):
                flagged = i < 10
                rows.append(AuditRow(
                    tenant=tenant, call_id=f"call-{week}-{i}", turn_id=1, utterance=f"turn {i}",
                    caller_utterance=None, verdict="unsupported" if flagged else "supported",
                    category="price" if flagged else "none", confidence=(0.75 if i >= 8 else 0.95) if flagged
                    else 0.9, grader_model="rules", constraints_version="v1",
                    severity="critical" if flagged else "info", created_at=stamp + i))
            rows = await store.write_many(rows)
            for i, row in enumerate(rows):
                row_id = row.id or 0
                if i < 8:
                    await store.review(row_id, "acknowledge", "real", actor="dana")
                elif i < 10:
                    await store.review(row_id, "override", "the price is right", actor="dana")
                elif i < 19:
                    await store.review(row_id, "acknowledge", "", actor="sam")
                elif i == 19:
                    await store.review(row_id, "acknowledge", "", actor="sam")
                    await store.review(row_id, "escalate", "quoted a fee we do not charge", actor="sam")


async def test_reviews_become_labels_weighted_by_the_rows_they_stand_for(sqlite_store: AuditStore) -> None:
    await seed(sqlite_store)
    report = await calibrate(sqlite_store, per_week=100)
    assert [(w.tenant, w.week) for w in report.weeks] == [
        ("acme", "2026-W20"), ("acme", "2026-W21"), ("sparkle", "2026-W20"), ("sparkle", "2026-W21")]
    for week in report.weeks:
        assert (week.audited, week.sampled, week.labeled) == (50, 50, 20)
        assert week.precision == pytest.approx(0.8)
        # 8 caught; the one miss among 10 reviewed unflagged rows stands for 4 of the 40.
        assert week.recall == pytest.approx(8 / 12)
    assert report.total.precision == pytest.approx(0.8) and report.total.recall == pytest.approx(8 / 12)
    bins = {(b.low, round(b.high, 1)): b for b in report.bins}
    high, mid, low = bins[(0.9, 1.0)], bins[(0.7, 0.8)], bins[(0.8, 0.9)]
    # 32 right flags at 0.95, and 40 reviewed unflagged rows at 0.9 of which 4 were misses.
    assert (high.rows, high.observed, high.mean_confidence) == (72, pytest.approx(68 / 72), pytest.approx(
        (32 * 0.95 + 40 * 0.9) / 72))
    assert (mid.rows, mid.observed) == (8, 0.0)  # the false flags said 0.75
    assert low.rows == 0
    assert len(report.unlabeled) == 4 * 30
    text = report.table()
    assert "precision" in text and "reliability" in text and "2026-W21" in text and "-0.75" in text


async def test_the_sample_is_per_stratum_and_seeded(sqlite_store: AuditStore) -> None:
    await seed(sqlite_store)
    first = await calibrate(sqlite_store, per_week=5, seed=3, tenant="acme")
    again = await calibrate(sqlite_store, per_week=5, seed=3, tenant="acme")
    other = await calibrate(sqlite_store, per_week=5, seed=4, tenant="acme")
    assert [w.sampled for w in first.weeks] == [10, 10]  # 5 flagged and 5 unflagged per week
    assert [r.id for r in first.unlabeled] == [r.id for r in again.unlabeled]
    assert [r.id for r in first.unlabeled] != [r.id for r in other.unlabeled]
    assert {w.tenant for w in first.weeks} == {"acme"}


async def test_calibrate_command_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}"
    store = AuditStore(url)
    await store.create_tables()
    await seed(store)
    await store.close()
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["grader", "calibrate", "--audit-url", url, "--per-week", "20", "--show-unlabeled"])
    assert await _run(args) == 0
    out = capsys.readouterr().out
    assert "reliability" in out and "sparkle" in out and "acme" in out and "/t/acme/calls/" in out
    bad = parser.parse_args(["grader", "calibrate", "--audit-url", url, "--since", "last week"])
    assert await _run(bad) == 2
    assert "--since" in capsys.readouterr().err


async def _run(args: argparse.Namespace) -> int:
    import asyncio

    return await asyncio.to_thread(args.func, args)  # the command runs its own event loop
