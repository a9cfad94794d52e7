import pytest

from pipecat_harness.grader.audit import AuditRow, AuditStore


def row(call: str, turn: int, verdict: str, category: str = "price") -> AuditRow:
    return AuditRow(tenant="acme", call_id=call, turn_id=turn, utterance=f"turn {turn}", caller_utterance="hi",
                    verdict=verdict, category=category, claim="c", constraint_ref="px_basic", rationale="r",
                    confidence=0.9, grader_model="rules", constraints_version="v1", severity="critical")


async def test_rows_round_trip_and_flagged_are_newest_first(audit_store: AuditStore) -> None:
    for turn, verdict in enumerate(["supported", "unsupported", "out_of_scope", "llm_flagged", "not_graded"], 1):
        await audit_store.write(row("call-a", turn, verdict))
    await audit_store.write(row("call-b", 1, "unsupported"))
    everything = await audit_store.rows(call_id="call-a")
    assert [r.verdict for r in everything] == ["supported", "unsupported", "out_of_scope", "llm_flagged", "not_graded"]
    assert everything[0].caller_utterance == "hi" and everything[0].constraints_version == "v1"
    flagged = await audit_store.flagged()
    assert [(r.call_id, r.turn_id) for r in flagged] == [("call-b", 1), ("call-a", 4), ("call-a", 2)]
    assert await audit_store.count() == 6


async def test_review_actions_persist(audit_store: AuditStore) -> None:
    written = await audit_store.write(row("call-a", 1, "unsupported"))
    assert written.id is not None
    reviewed = await audit_store.review(written.id, "escalate", "customer was overcharged")
    assert (reviewed.review_status, reviewed.review_note) == ("escalated", "customer was overcharged")
    assert reviewed.reviewed_at is not None
    assert [r.id for r in await audit_store.flagged(status="escalated")] == [written.id]
    assert await audit_store.flagged(status="open") == []
    with pytest.raises(ValueError, match="unknown review action"):
        await audit_store.review(written.id, "delete")
    with pytest.raises(KeyError):
        await audit_store.review(written.id + 100, "acknowledge")


async def test_a_turns_rows_on_a_sqlite_file_are_written_by_the_stores_own_thread(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    store = AuditStore(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}")
    await store.create_tables()
    from sqlalchemy.ext.asyncio import AsyncEngine

    begin = AsyncEngine.begin

    def no_engine_writes(engine: AsyncEngine) -> None:
        raise AssertionError("a turn's rows went through the SQLAlchemy engine on the call's loop")

    monkeypatch.setattr(AsyncEngine, "begin", no_engine_writes)
    written = await store.write_many([row("call-a", 1, "supported"), row("call-a", 1, "unsupported")])
    assert [r.id for r in written] == [1, 2]
    assert any(t.name == "grader audit-sqlite" for t in threading.enumerate())
    monkeypatch.setattr(AsyncEngine, "begin", begin)
    assert [(r.id, r.verdict) for r in await store.rows(call_id="call-a")] == [(1, "supported"), (2, "unsupported")]
    reviewed = await store.review(2, "acknowledge")
    assert reviewed.review_status == "acknowledged"
    await store.close()
    assert not any(t.name == "grader audit-sqlite" for t in threading.enumerate())
