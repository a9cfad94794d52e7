import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from pipecat.frames.frames import (
    FunctionCallResultFrame,
    LLMContextAssistantTurnFrame,
    LLMContextUserTurnFrame,
    TextFrame,
)
from pipecat.processors.filters.identity_filter import IdentityFilter
from pipecat.tests.utils import run_test

from pipecat_harness.config import HarnessConfig
from pipecat_harness.decisions import DecisionLog
from pipecat_harness.grader.audit import AuditStore
from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.observer import TurnGrader
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import Verdict


def user(text: str) -> LLMContextUserTurnFrame:
    return LLMContextUserTurnFrame(text=text, timestamp="2026-01-01T00:00:00Z")


def assistant(text: str) -> LLMContextAssistantTurnFrame:
    return LLMContextAssistantTurnFrame(text=text, timestamp="2026-01-01T00:00:01Z")


def turn_grader(constraints: ConstraintList, store: AuditStore, **kwargs: object) -> TurnGrader:
    grader = TurnGrader(RuleGrader(constraints), audit=store, tenant="sparkle", call_id="call-1",
                        constraints_version=constraints.version_id, **kwargs)  # type: ignore[arg-type]
    grader.grader = RuleGrader(constraints, grader.executed)
    return grader


async def test_grades_committed_turns_with_the_caller_turn_and_passes_frames_unchanged(
    constraints: ConstraintList, sqlite_store: AuditStore
) -> None:
    decisions = DecisionLog("call-1")
    observer = turn_grader(constraints, sqlite_store, decisions=decisions)
    frames = [
        user("How much is the basic detail?"),
        assistant("The basic detail is $129."),
        TextFrame(text="not a committed turn: The basic detail is $1."),
        user("Can you update my address?"),
        FunctionCallResultFrame(function_name="modify_order_address", tool_call_id="t1", arguments={},
                                result={"ok": True}, run_llm=False),
        assistant("I've updated your address."),
        assistant("Thanks for calling!"),
    ]
    down, _ = await run_test(IdentityFilter(), frames_to_send=frames,
                             expected_down_frames=[type(f) for f in frames], observers=[observer])
    assert [getattr(f, "text", None) for f in down] == [getattr(f, "text", None) for f in frames]
    rows = await sqlite_store.rows(call_id="call-1")
    assert [(r.turn_id, r.verdict, r.category, r.severity) for r in rows] == [
        (1, "unsupported", "price", "critical"),
        (2, "supported", "action", "info"),
        (3, "supported", "none", "info"),
    ]
    assert rows[0].caller_utterance == "How much is the basic detail?"
    assert rows[0].constraints_version == "v1" and rows[0].grader_model == "rules"
    assert [d.action for d in decisions.by_control("grader")] == ["flagged"]


class BlockedGrader:
    """A grader that waits until released, to show nobody else waits for it."""

    model = "blocked"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0

    async def grade(self, agent_utterance: str, caller_utterance: str | None = None, *,
                    call_id: str | None = None) -> Sequence[Verdict]:
        self.started += 1
        await self.release.wait()
        return [Verdict("supported", agent_utterance, "price", "px_basic", "ok", 1.0)]


async def test_a_full_queue_writes_not_graded_rows_instead_of_blocking(
    constraints: ConstraintList, sqlite_store: AuditStore
) -> None:
    grader = BlockedGrader()
    observer = TurnGrader(grader, audit=sqlite_store, tenant="t", call_id="call-q", constraints_version="v1",
                          queue_size=1)
    for n in range(3):
        observer.submit(f"turn {n}", None)  # returns at once although nothing is graded yet
    grader.release.set()
    await observer.drain(5)
    await observer.cleanup()
    rows = await sqlite_store.rows(call_id="call-q")
    assert sorted((r.turn_id, r.verdict) for r in rows) == [(1, "supported"), (2, "not_graded"), (3, "not_graded")]
    assert all("queue full" in r.rationale for r in rows if r.verdict == "not_graded")


async def test_frames_flow_while_the_grader_is_still_busy(sqlite_store: AuditStore) -> None:
    grader = BlockedGrader()
    observer = TurnGrader(grader, audit=sqlite_store, tenant="t", call_id="call-s", constraints_version="v1")
    seen_while_grading: list[int] = []

    class Probe(IdentityFilter):
        async def process_frame(self, frame, direction):  # type: ignore[no-untyped-def]
            await super().process_frame(frame, direction)
            if isinstance(frame, TextFrame):
                rows = await sqlite_store.count() if observer.rows_written else 0
                seen_while_grading.append(rows)
                grader.release.set()

    frames = [assistant("The basic detail is $149."), TextFrame(text="next frame")]
    await run_test(Probe(), frames_to_send=frames, expected_down_frames=[LLMContextAssistantTurnFrame, TextFrame],
                   observers=[observer])
    assert seen_while_grading == [0]  # the next frame passed before the turn was graded
    assert [r.verdict for r in await sqlite_store.rows(call_id="call-s")] == ["supported"]


class BrokenGrader:
    model = "broken"

    async def grade(self, agent_utterance: str, caller_utterance: str | None = None, *,
                    call_id: str | None = None) -> Sequence[Verdict]:
        raise RuntimeError("model unavailable")


async def test_a_grader_error_still_writes_a_row(sqlite_store: AuditStore) -> None:
    observer = TurnGrader(BrokenGrader(), audit=sqlite_store, tenant="t", call_id="call-e", constraints_version="v1")
    observer.submit("The basic detail is $129.", "How much?")
    await observer.drain(5)
    await observer.cleanup()
    [row] = await sqlite_store.rows(call_id="call-e")
    assert row.verdict == "not_graded" and "model unavailable" in row.rationale and row.severity == "warning"


def test_the_control_plugs_the_observer_into_the_harness(tmp_path: Path) -> None:
    from pipecat_harness.config import ConfigError
    from pipecat_harness.grader.control import GraderControl
    from pipecat_harness.harness import CONTROL_FACTORIES, Harness

    assert CONTROL_FACTORIES["grader"] == "pipecat_harness.grader.control:GraderControl"
    data = Path(__file__).resolve().parents[2] / "pipecat_harness" / "grader" / "data" / "detailing.yaml"
    config = HarnessConfig(grader={"enabled": True, "constraints_path": str(data),
                                   "audit_url": f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"},
                           trace={"enabled": False}).only("grader")
    harness = Harness(config, call_id="call-h")
    control = harness.control("grader")
    assert isinstance(control, GraderControl)
    [observer] = [o for o in harness.observers()[0].members if isinstance(o, TurnGrader)]
    assert observer.call_id == "call-h" and observer.tenant == "sparkle_detailing"
    assert isinstance(control.grader, RuleGrader) and control.grader.ledger is observer.executed
    missing = HarnessConfig(grader={"enabled": True}, trace={"enabled": False}).only("grader")
    with pytest.raises(ConfigError, match="constraints_path"):
        Harness(missing)
    unsigned = HarnessConfig(grader={"enabled": True, "constraints_path": str(data),
                                     "webhook_url": "http://127.0.0.1:9/hook"}, trace={"enabled": False}).only("grader")
    with pytest.raises(ConfigError, match="webhook_secret"):
        Harness(unsigned)
    broken = tmp_path / "broken.yaml"
    broken.write_text("hours: {mon: nine-ish}")
    invalid = HarnessConfig(grader={"enabled": True, "constraints_path": str(broken)},
                            trace={"enabled": False}).only("grader")
    with pytest.raises(ConfigError, match="hours for 'mon'"):
        Harness(invalid)
