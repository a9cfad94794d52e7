import asyncio

import pytest

from pipecat_harness.state.call_state import CallState, CallStateStore, Provenance, VersionConflict
from pipecat_harness.state.store import StateStore, StoreError


def test_fact_versions_and_provenance():
    state = CallState(call_id="c")
    heard = Provenance("caller", turn_id=1, detail="my order is W2378156", at=10.0)
    assert state.set_fact("order_id", "#W2378156", heard)
    assert not state.set_fact("order_id", "#W2378156", Provenance("model", turn_id=2, at=11.0))
    assert state.fact("order_id").provenance == heard  # re-stating keeps where it came from
    looked_up = Provenance("tool", turn_id=2, detail="get_order_details", at=12.0)
    assert state.set_fact("order_id", "#W2378157", looked_up)
    fact = state.fact("order_id")
    assert (fact.value, fact.version, fact.provenance.source) == ("#W2378157", 2, "tool")
    assert state.fact("missing") is None


def test_roundtrip_keeps_all_three_memories():
    state = CallState(call_id="c")
    state.add_message("user", "Refund my thermostat", turn_id=1)
    state.set_fact("item", "thermostat", Provenance("caller", turn_id=1, at=1.0))
    state.set_business({"order": {"status": "delivered"}}, Provenance("tool", turn_id=1, detail="get_order", at=2.0))
    assert CallState.from_dict(state.to_dict()) == state
    with pytest.raises(ValueError, match="not a call state"):
        CallState.from_dict({"call_id": "c", "working": {"x": {"value": 1}}})


async def test_updates_are_versioned_and_serialised(any_store: StateStore):
    states = CallStateStore(any_store)

    async def add(state: CallState) -> None:
        count = int(state.business.get("count", 0))
        await asyncio.sleep(0.002)  # a read-modify-write that would lose updates without the lock
        state.set_business({"count": count + 1}, Provenance("system"))

    await asyncio.gather(*(states.update("c", add) for _ in range(15)))
    state = await states.load("c")
    assert state.business == {"count": 15}
    assert state.version == 15


async def test_stale_update_is_refused_and_writes_nothing(any_store: StateStore):
    states = CallStateStore(any_store)
    first = await states.update("c", lambda s: s.add_message("user", "hi", turn_id=1))
    await states.update("c", lambda s: s.add_message("assistant", "hello", turn_id=1))
    with pytest.raises(VersionConflict, match="version 2"):
        await states.update("c", lambda s: s.set_fact("x", 1, Provenance("model")), expected_version=first.version)
    state = await states.load("c")
    assert state.working == {} and len(state.history) == 2
    await states.update("c", lambda s: s.set_fact("x", 1, Provenance("model")), expected_version=2)
    assert (await states.load("c")).fact("x").value == 1


async def test_corrupt_record_is_a_clear_error(any_store: StateStore):
    await any_store.set_json("call_state:c", {"history": 5})
    with pytest.raises(StoreError, match="not a call state"):
        await CallStateStore(any_store).load("c")
