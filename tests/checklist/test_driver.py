import asyncio
from pathlib import Path

import pytest
import yaml

from pipecat_harness.checklist.analysis import Analysis, Analyzer, AnalyzerError
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.checklist.progress import ItemStatus
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer
from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.redis_store import RedisStateStore
from pipecat_harness.state.store import StateStore, StoreError
from tests.state.worker_processes import spawn_worker, start_together

WALK = yaml.safe_load((Path(__file__).parent / "data" / "site_check_in_walk.yaml").read_text())
WORKER = Path(__file__).parents[1] / "state" / "redis_worker.py"


class CountingAnalyzer(RuleAnalyzer):
    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[str] = []
        self.delay = delay

    async def analyze(self, checklist, state, utterance) -> Analysis:
        self.calls.append(utterance)
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().analyze(checklist, state, utterance)


class BrokenAnalyzer(Analyzer):
    name = "broken"

    async def analyze(self, checklist, state, utterance) -> Analysis:
        raise AnalyzerError("model returned garbage")


async def test_walks_the_bundled_checklist_to_completion(any_store: StateStore):
    decisions: list[tuple[str, dict]] = []
    driver = ChecklistDriver(
        bundled_checklist(WALK["checklist"]), any_store, on_decision=lambda a, e: decisions.append((a, e))
    )
    turns: list[str] = []
    kinds = []
    for turn in WALK["turns"]:
        turns.append(turn["say"])
        directive = await driver.sync("call-walk", turns)
        kinds.append(directive.kind)
        # the model may run again in the same turn (after a tool result): nothing is asked twice
        assert await driver.sync("call-walk", turns) == directive
    assert kinds == [t["next"] for t in WALK["turns"]]
    state = await driver.load("call-walk")
    assert state.asked == WALK["expected_asked"]
    assert len(state.asked) == len(set(state.asked))
    assert {k: state.status(k).value for k in state.all_keys(driver.checklist)} == WALK["expected_items"]
    assert state.all_closed(driver.checklist)
    assert state.analyzed_turns == len(WALK["turns"])
    assert [a for a, _ in decisions].count("analyzed") == len(WALK["turns"])


async def test_superseded_partial_bails_without_a_model_call(any_store: StateStore):
    analyzer = CountingAnalyzer()
    driver = ChecklistDriver(bundled_checklist(), any_store, analyzer=analyzer, debounce_secs=0.05)
    a = asyncio.create_task(driver.sync("c", ["No incidents"], stamp=3.0))
    await asyncio.sleep(0.01)
    b = asyncio.create_task(driver.sync("c", ["No incidents and no near misses."], stamp=4.0))
    assert await a is None
    directive = await b
    assert analyzer.calls == ["No incidents and no near misses."]
    assert directive.kind == "pair" and directive.targets == ("scheduling_conflicts", "compliance_updates")
    # an utterance with nothing newer behind it goes through after the debounce
    assert await driver.sync("c", ["No incidents and no near misses.", "Hello?"], stamp=5.0) is not None
    assert analyzer.calls == ["No incidents and no near misses.", "Hello?"]


async def test_analyzer_failure_falls_back_to_the_rules_and_is_recorded(any_store: StateStore):
    decisions: list[str] = []
    driver = ChecklistDriver(
        bundled_checklist(), any_store, analyzer=BrokenAnalyzer(), on_decision=lambda a, e: decisions.append(a)
    )
    directive = await driver.sync("c", ["No incidents and no near misses."])
    assert "analyzer_fallback" in decisions
    assert directive.targets == ("scheduling_conflicts", "compliance_updates")


async def test_analyzer_failure_without_fallback_leaves_state_untouched(any_store: StateStore):
    driver = ChecklistDriver(bundled_checklist(), any_store)
    await driver.sync("c", ["Hello."])
    before = (await driver.load("c")).to_dict()
    broken = ChecklistDriver(bundled_checklist(), any_store, analyzer=BrokenAnalyzer(), fallback_analyzer=None)
    with pytest.raises(AnalyzerError):
        await broken.sync("c", ["Hello.", "No incidents."])
    assert (await driver.load("c")).to_dict() == before


async def test_corrupt_stored_state_is_a_clear_error(any_store: StateStore):
    driver = ChecklistDriver(bundled_checklist(), any_store)
    await any_store.set_json("checklist:site_check_in:c", {"items": "nonsense"})
    with pytest.raises(StoreError, match="not a checklist state"):
        await driver.sync("c", ["No incidents."])


async def test_concurrent_syncs_in_one_process_analyse_each_turn_once(any_store: StateStore):
    analyzer = CountingAnalyzer(delay=0.01)
    driver = ChecklistDriver(bundled_checklist(), any_store, analyzer=analyzer)
    turns = [t["say"] for t in WALK["turns"][:4]]
    await asyncio.gather(*(driver.sync("c", turns[: i % 4 + 1], stamp=float(i)) for i in range(12)))
    state = await driver.load("c")
    assert sorted(analyzer.calls) == sorted(set(analyzer.calls))
    assert state.analyzed_turns == len(analyzer.calls)
    assert state.status("incidents@warehouse") in (ItemStatus.DENIED, ItemStatus.OPEN)


@pytest.mark.redis
async def test_worker_processes_analyse_each_turn_exactly_once(redis_store: RedisStateStore):
    processes = [
        spawn_worker("driver", redis_store.prefix, 0.0, str(count), call_id="call-mp") for count in (1, 2, 3, 3)
    ]
    await start_together(redis_store, processes)
    driver = ChecklistDriver(bundled_checklist(), redis_store)
    state = await driver.load("call-mp")
    assert state.analyzed_turns == 3
    assert int(await redis_store._redis.get(redis_store.prefix + "analyzer_calls")) == 3
    assert state.status("scheduling_conflicts") == ItemStatus.DENIED
    assert state.status("compliance_updates") == ItemStatus.ANSWERED


async def test_decision_records_are_not_built_while_the_sink_does_not_want_them(any_store: StateStore):
    decisions: list[tuple[str, dict]] = []
    wanted = {"now": False}
    analysis_dicts: list[int] = []

    class WatchedAnalyzer(RuleAnalyzer):
        async def analyze(self, checklist, state, utterance) -> Analysis:
            analysis = await super().analyze(checklist, state, utterance)
            original = analysis.to_dict
            analysis.to_dict = lambda: analysis_dicts.append(1) or original()  # type: ignore[method-assign]
            return analysis

    driver = ChecklistDriver(
        bundled_checklist(WALK["checklist"]),
        any_store,
        analyzer=WatchedAnalyzer(),
        on_decision=lambda a, e: decisions.append((a, e)),
        decisions_wanted=lambda: wanted["now"],
    )
    turns = [WALK["turns"][0]["say"]]
    quiet = await driver.sync("call-quiet", turns)
    assert decisions == [] and analysis_dicts == []
    assert (await driver.load("call-quiet")).analyzed_turns == 1  # the state is saved all the same
    wanted["now"] = True
    turns.append(WALK["turns"][1]["say"])
    loud = await driver.sync("call-quiet", turns)
    assert [a for a, _ in decisions] == ["analyzed", "directed"] and analysis_dicts == [1]
    assert decisions[1][1]["directive"] == loud.to_dict() and quiet.kind == WALK["turns"][0]["next"]


async def test_state_with_a_lone_surrogate_is_saved_escaped(any_store: StateStore):
    driver = ChecklistDriver(bundled_checklist(WALK["checklist"]), any_store)
    await driver.sync("call-surrogate", ["No incidents \udc00 at all."])
    state = await driver.load("call-surrogate")
    assert state.analyzed_turns == 1
    assert any("\udc00" in note for item in state.items.values() for note in item.notes)


async def test_an_analyzer_that_waits_is_bounded_by_the_work_deadline(any_store: StateStore):
    lock = CallLock(any_store, ttl_secs=1.0, work_timeout_secs=0.05)
    driver = ChecklistDriver(
        bundled_checklist(WALK["checklist"]), any_store, analyzer=CountingAnalyzer(delay=1.0), lock=lock
    )
    with pytest.raises(TimeoutError):
        await driver.sync("call-slow", [WALK["turns"][0]["say"]])
    driver.analyzer = RuleAnalyzer()  # the lock was released with the timeout: the next turn goes through
    assert (await driver.sync("call-slow", [WALK["turns"][0]["say"]])).kind == WALK["turns"][0]["next"]
