"""What the proxy does before it sends the model request: one Redis round trip, and no state save."""

import asyncio
import copy

import pytest

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.quiet_window import QuietWindow
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.state.memory import MemoryStateStore
from tests.proxy.test_app import CALL_ID, VAPI, _client
from tests.services import counting_redis


class RecordingUpstream(ScriptedUpstream):
    """Notes how many Redis requests had been sent when each model request starts."""

    def __init__(self, trips) -> None:
        super().__init__()
        self.trips = trips
        self.mark = 0
        self.before_request: list[int] = []

    def stream(self, request):
        self.before_request.append(self.trips.count - self.mark)
        return super().stream(request)


@pytest.mark.redis
async def test_each_turn_reads_its_checklist_state_in_one_round_trip_before_the_model_request(redis_prefix):
    async with counting_redis(redis_prefix) as (store, trips):
        upstream = RecordingUpstream(trips)
        driver = ChecklistDriver(bundled_checklist(), store)
        service = ProxyService(upstream, driver)
        body = copy.deepcopy(VAPI)
        body["call"]["id"] = "one-trip"
        async with _client(service) as client:
            await client.post("/chat/completions", json={**body, "call": {"id": "warm-up"}})  # loads the scripts
            for answer in ("No incidents, no near misses.", "No scheduling conflicts and no compliance updates."):
                upstream.mark = trips.count
                response = await client.post("/chat/completions", json=body)
                assert response.status_code == 200
                body["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": answer}]
        assert upstream.before_request[1:] == [1, 1]
        state = await driver.load("one-trip")
        # The state written after each directive is the one read the next turn.
        assert (state.analyzed_turns, state.version) == (2, 2)
        directives = [request.system.directive for request in upstream.requests[1:]]
        assert len(set(directives)) == 2 and all(directives)  # each turn moved the checklist on


async def test_the_model_request_goes_out_before_the_turns_state_is_saved_and_the_answer_ends_after():
    driver = ChecklistDriver(bundled_checklist(), MemoryStateStore())
    versions_at_request: list[int] = []

    class Upstream(ScriptedUpstream):
        async def stream(self, request):
            versions_at_request.append((await driver.load(CALL_ID)).version)
            async for chunk in super().stream(request):
                yield chunk

    body = copy.deepcopy(VAPI)
    async with _client(ProxyService(Upstream(), driver)) as client:
        for answer in ("No incidents, no near misses.", None):
            response = await client.post("/chat/completions", json=body)
            assert response.status_code == 200
            if answer:
                body["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": answer}]
    # Each request found the state as the previous answer left it: its own save came after the model request,
    # and before the answer's end (the next request saw it).
    assert versions_at_request == [0, 1]
    assert (await driver.load(CALL_ID)).version == 2


async def test_turns_arriving_together_all_reach_the_model_before_any_of_their_states_is_saved():
    store = MemoryStateStore()
    driver = ChecklistDriver(bundled_checklist(), store)
    calls = [f"burst-{i}" for i in range(12)]
    saved_at_request: list[int] = []
    reached: asyncio.Queue[None] = asyncio.Queue()
    arrived = asyncio.Event()

    class Upstream(ScriptedUpstream):
        async def stream(self, request):
            saved_at_request.append(sum([(await driver.load(call)).version for call in calls]))
            reached.put_nowait(None)
            if len(saved_at_request) == len(calls):
                arrived.set()
            await arrived.wait()  # the model answers once every request has reached it
            async for chunk in super().stream(request):
                yield chunk

    service = ProxyService(Upstream(), driver, quiet=QuietWindow(quiet_secs=30, max_wait_secs=60))

    async def turn(client, call_id):
        body = copy.deepcopy(VAPI)
        body["call"]["id"] = call_id
        return await client.post("/chat/completions", json=body)

    async with _client(service) as client:
        posts = []
        for call in calls:  # one after another, each once the previous one has reached the model
            posts.append(asyncio.create_task(turn(client, call)))
            await reached.get()
        responses = await asyncio.gather(*posts)
    assert all(response.status_code == 200 for response in responses)
    assert saved_at_request == [0] * len(calls)
    # Each answer ended after its own state was saved.
    assert [(await driver.load(call)).version for call in calls] == [1] * len(calls)
