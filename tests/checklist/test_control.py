from pathlib import Path
from types import SimpleNamespace

import pytest
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.filters.identity_filter import IdentityFilter

from pipecat_harness.checklist.control import ChecklistControl, build_analyzer, load_configured_checklist
from pipecat_harness.checklist.director import ChecklistDirector
from pipecat_harness.checklist.llm_analyzer import GeminiAnalyzer
from pipecat_harness.checklist.model import ChecklistError
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer
from pipecat_harness.config import ChecklistSettings, HarnessConfig
from pipecat_harness.harness import CONTROL_FACTORIES, Harness
from pipecat_harness.placement import flatten
from pipecat_harness.state.redis_store import RedisStateStore


def _harness(**checklist) -> Harness:
    config = HarnessConfig().only("checklist")
    config = config.model_copy(update={"checklist": config.checklist.model_copy(update=checklist)})
    config = config.model_copy(update={"trace": config.trace.model_copy(update={"enabled": False})})
    return Harness(config, call_id="call-7")


def test_registered_and_placed_right_after_the_user_aggregator():
    assert CONTROL_FACTORIES["checklist"] == "pipecat_harness.checklist.control:ChecklistControl"
    harness = _harness()
    control = harness.control("checklist")
    assert isinstance(control, ChecklistControl)
    pair = LLMContextAggregatorPair(LLMContext())
    llm_stand_in = IdentityFilter()
    placed = flatten(harness.place([pair.user(), llm_stand_in, pair.assistant()]))
    user_index = placed.index(pair.user())
    director_index = next(i for i, p in enumerate(placed) if isinstance(p, ChecklistDirector))
    assert user_index < director_index < placed.index(llm_stand_in)
    assert control.director.call_id == "call-7"
    assert control.driver.on_decision is not None


def test_switched_off_by_default():
    config = HarnessConfig()
    harness = Harness(config.model_copy(update={"trace": config.trace.model_copy(update={"enabled": False})}))
    assert harness.control("checklist") is None


def test_settings_choose_store_analyzer_and_file(tmp_path: Path):
    control = _harness(store="redis", key_prefix="x:").control("checklist")
    assert isinstance(control.driver.store, RedisStateStore) and control.driver.store.prefix == "x:"
    assert isinstance(build_analyzer(ChecklistSettings()), RuleAnalyzer)
    gemini = build_analyzer(ChecklistSettings(analyzer="gemini"), gemini_client=SimpleNamespace())
    assert isinstance(gemini, GeminiAnalyzer)
    with pytest.raises(ChecklistError, match="cannot read"):
        load_configured_checklist(ChecklistSettings(checklist_path=str(tmp_path / "none.yaml")))


def test_lock_lease_is_short_and_renewed_not_longer_than_the_work():
    # the lease is renewed while work runs, so it need not outlive the work; it bounds a dead worker's stall
    assert ChecklistSettings().lock_ttl_secs <= 1.0 < ChecklistSettings().work_timeout_secs
    with pytest.raises(ValueError):
        ChecklistSettings(lock_ttl_secs=0)
