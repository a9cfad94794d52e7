import asyncio
import uuid

import pytest
import redis

from pipecat_harness.config import HarnessConfig
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import bundled_scenario_paths, load_scenario
from pipecat_harness.state.redis_store import RedisStateStore

SCENARIO = next(p for p in bundled_scenario_paths() if p.name == "checklist_site_check_in.yaml")

EXPECTED_ASKED = [
    "ask:incidents",
    "ask:near_misses",
    "ask:incidents@north yard",
    "ask:near_misses@north yard",
    "follow_up:incidents@north yard#1",
    "any_other:incidents@north yard#1",
    "ask:scheduling_conflicts",
    "ask:compliance_updates",
    "follow_up:compliance_updates#1",
    "topic:the client wants to visit on Friday",
    "ask:equipment_issues",
    "closing:summary",
    "closing:feedback",
    "closing:sign_off",
]


def _asked(result) -> list[str]:
    return [
        key
        for d in result.decisions
        if d.control == "checklist" and d.action == "directed"
        for key in d.evidence["directive"]["ask_keys"]
    ]


def _run(config: HarnessConfig):
    result = run_scenario(load_scenario(str(SCENARIO)), config)
    assert result.caller_completed, result.checks
    assert result.passed, result.checks
    return result


def test_simulated_call_walks_the_checklist_on_the_memory_store():
    result = _run(HarnessConfig().only("checklist"))
    asked = _asked(result)
    assert asked == EXPECTED_ASKED
    assert len(asked) == len(set(asked))
    analyzed = [d for d in result.decisions if d.control == "checklist" and d.action == "analyzed"]
    assert len(analyzed) == 10  # every caller turn analysed exactly once


def test_without_the_control_no_directive_reaches_the_model():
    result = _run(HarnessConfig().only())
    assert not [d for d in result.decisions if d.control == "checklist"]


@pytest.mark.redis
def test_simulated_call_walks_the_checklist_on_redis():
    try:
        redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable at 127.0.0.1:6379: {exc}")
    prefix = f"pipecat-harness-test-{uuid.uuid4().hex[:10]}:"
    config = HarnessConfig().only("checklist")
    config = config.model_copy(
        update={"checklist": config.checklist.model_copy(update={"store": "redis", "key_prefix": prefix})}
    )
    try:
        assert _asked(_run(config)) == EXPECTED_ASKED
    finally:

        async def clear() -> int:
            store = RedisStateStore(prefix=prefix)
            try:
                return await store.clear()
            finally:
                await store.close()

        assert asyncio.run(clear()) >= 1
