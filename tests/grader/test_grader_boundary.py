"""The grader at the business boundary: not-done statuses without a ledger, declared channels and tools,
totals the caller asked about, and the design's worked example."""

from pathlib import Path

import pytest
from pipecat.frames.frames import FunctionCallResultFrame, LLMContextAssistantTurnFrame, LLMContextUserTurnFrame
from pipecat.processors.filters.identity_filter import IdentityFilter
from pipecat.tests.utils import run_test

from pipecat_harness.grader import ConstraintList, LabeledSet, RuleGrader, evaluate
from pipecat_harness.grader.audit import AuditStore
from pipecat_harness.grader.observer import TurnGrader
from pipecat_harness.tools.result import NOT_DONE_STATUSES, reports_done

DATA = Path(__file__).resolve().parents[2] / "pipecat_harness" / "grader" / "data"
DESIGN_EXAMPLE = {
    "tenant": "design", "version": "v1",
    "price_list": [{"id": "px_basic", "service": "basic detail", "price_usd": 149},
                   {"id": "px_premium", "service": "premium detail", "price_usd": 249}],
    "hours": {"mon_fri": "08:00-18:00", "sat": "09:00-15:00", "sun": "closed"},
    "policies": {"refund": "no_cash_refunds_store_credit_only", "reschedule": "free_up_to_24h_before"},
    "capabilities": ["book_appointment", "reschedule", "answer_pricing"],
}


@pytest.mark.parametrize("status", sorted(NOT_DONE_STATUSES | {"awaiting_confirmation", "held", "unknown"}))
def test_every_not_done_status_reports_not_done(status):
    assert not reports_done({"status": status, "tool": "issue_refund"})


async def test_without_a_ledger_a_refund_awaiting_confirmation_is_not_done(tmp_path):
    constraints = ConstraintList.load(DATA / "retail.yaml")
    store = AuditStore(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}")
    await store.create_tables()
    observer = TurnGrader(RuleGrader(constraints), audit=store, tenant="acme", call_id="c-1",
                          constraints_version=constraints.version_id)
    observer.grader = RuleGrader(constraints, observer.executed)
    held = {"status": "awaiting_confirmation", "tool": "issue_refund", "operation_id": "proposal-1",
            "instruction": "Read the request back and ask the caller to confirm; it has not been done."}
    frames = [
        LLMContextUserTurnFrame(text="Can you refund my thermostat?", timestamp="2026-01-01T00:00:00Z"),
        FunctionCallResultFrame(function_name="issue_refund", tool_call_id="t1", arguments={}, result=held,
                                run_llm=False),
        LLMContextAssistantTurnFrame(text="Done, I've refunded your money.", timestamp="2026-01-01T00:00:01Z"),
    ]
    await run_test(IdentityFilter(), frames_to_send=frames, expected_down_frames=[type(f) for f in frames],
                   observers=[observer])
    rows = await store.rows(call_id="c-1")
    await store.close()
    assert [(r.verdict, r.category) for r in rows] == [("unsupported", "action")]


async def test_the_designs_worked_example_gets_a_price_verdict_and_no_capability_verdict():
    grader = RuleGrader(ConstraintList.from_data(DESIGN_EXAMPLE))
    verdicts = await grader.grade(
        "A quick detail runs about $129, and yeah, we offer a full 30-day money-back guarantee.",
        "How much for a quick detail and can I get a refund if I change my mind?")
    by_category = {v.category: v for v in verdicts}
    assert by_category["price"].verdict == "unsupported" and "px_basic" in str(by_category["price"].constraint_ref)
    assert any(v.category == "policy" and v.constraint_ref == "policies.refund" and v.verdict == "unsupported"
               for v in verdicts)
    assert "capability" not in by_category


@pytest.mark.parametrize("text, grounded", [
    ("I'll text you the confirmation.", True),
    ("I'll shoot you an email with the confirmation.", False),
    ("I've emailed you the confirmation.", False),
    ("I'll WhatsApp the confirmation over.", False),
])
async def test_sends_are_checked_against_the_declared_channels(text, grounded):
    grader = RuleGrader(ConstraintList.load(DATA / "dental.yaml"))
    flagged = any(v.flagged for v in await grader.grade(text))
    assert flagged is not grounded


@pytest.mark.parametrize("text, grounded", [("That's three ninety-eight in total.", True),
                                            ("That's four hundred in total.", False)])
async def test_a_total_is_checked_against_the_services_the_caller_asked_about(text, grounded):
    grader = RuleGrader(ConstraintList.load(DATA / "detailing.yaml"))
    verdicts = await grader.grade(text, "How much are the basic and the premium together?")
    assert [v.verdict for v in verdicts if v.category == "price"] == ["supported" if grounded else "unsupported"]


@pytest.mark.parametrize("name, min_recall, max_false_flags", [
    ("dev_boundary.yaml", 1.0, 0.0),       # tuned on
    ("holdout_boundary.yaml", 0.85, 0.15),  # written before the tuning, only measured
])
async def test_recall_and_false_flags_on_the_boundary_sets(name, min_recall, max_false_flags):
    labeled = LabeledSet.load(DATA / name)
    report = await evaluate(lambda constraints, ledger: RuleGrader(constraints, ledger), labeled)
    assert report.total.recall >= min_recall and report.total.false_flag_rate <= max_false_flags, report.table()


async def test_without_a_ledger_a_write_settled_later_counts_as_done():
    from pipecat_harness.config import HarnessConfig
    from pipecat_harness.events import GateDecided
    from pipecat_harness.harness import Harness

    config = HarnessConfig(grader={"constraints_path": "bundled:retail"}).only("grader")
    harness = Harness(config, call_id="c-late")
    control = harness.control("grader")
    grader = RuleGrader(control.constraints, control.turn_grader.executed)
    claim = "Good news: your refund went through after all, I've refunded the thermostat."
    assert any(v.flagged for v in await grader.grade(claim, call_id="c-late"))
    # The gate reports the operation the model was told was unknown as settled: succeeded.
    harness.events.publish(GateDecided(harness.decisions.record(
        "tool_gate", "reconciled", {"tool": "issue_refund", "idempotency_key": "k1", "status": "succeeded",
                                    "source": "late_reply"})))
    assert not any(v.flagged for v in await grader.grade(claim, call_id="c-late"))
    harness.events.publish(GateDecided(harness.decisions.record(
        "tool_gate", "reconciled", {"tool": "cancel_pending_order", "idempotency_key": "k2", "status": "failed",
                                    "source": "reconciler"})))
    assert any(v.flagged for v in await grader.grade("I've cancelled the order.", call_id="c-late"))
