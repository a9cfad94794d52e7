"""One decision per loop iteration under a burst, so each model request follows its own decision."""

import asyncio
import copy

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.proxy.scripted import ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.turnstile import Turnstile
from pipecat_harness.state.memory import MemoryStateStore
from tests.proxy.test_app import VAPI


async def test_a_caller_alone_passes_without_waiting_and_a_crowd_passes_one_per_loop_iteration():
    turnstile = Turnstile()
    events: list[str] = []

    async def caller(name: str) -> None:
        await turnstile.enter()
        events.append(name)
        asyncio.get_running_loop().call_soon(events.append, f"after {name}")  # runs at the next iteration

    entry = turnstile.enter()
    try:
        entry.send(None)  # one step: an entry with nobody ahead completes without suspending
    except StopIteration:
        pass
    else:  # pragma: no cover - the assertion below reports it
        raise AssertionError("a lone caller was made to wait")
    await asyncio.sleep(0)
    await asyncio.gather(*(caller(name) for name in "abcd"))
    assert events == ["a", "after a", "b", "after b", "c", "after c", "d", "after d"]


async def test_a_caller_cancelled_while_waiting_is_skipped():
    turnstile = Turnstile()
    first, waiting, behind = (asyncio.create_task(turnstile.enter()) for _ in range(3))
    await asyncio.sleep(0)  # all three have tried: the first is in, the other two wait
    assert first.done() and not waiting.done()
    waiting.cancel()
    await asyncio.wait_for(behind, timeout=5)
    assert waiting.cancelled()
    await asyncio.wait_for(turnstile.enter(), timeout=5)  # and the turnstile is free again


async def test_under_a_burst_each_model_request_goes_out_after_its_own_decision_not_the_whole_bursts():
    """The upstream opens a real loopback connection per request, which completes only when the loop polls."""
    driver = ChecklistDriver(bundled_checklist(), MemoryStateStore())
    decided = 0
    begin = driver.begin

    async def counting_begin(*args, **kwargs):
        nonlocal decided
        turn = await begin(*args, **kwargs)
        decided += 1
        return turn

    driver.begin = counting_begin  # type: ignore[method-assign]
    server = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    decided_when_sent: list[int] = []

    class ConnectingUpstream(ScriptedUpstream):
        async def stream(self, request):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            decided_when_sent.append(decided)
            writer.close()
            async for chunk in super().stream(request):
                yield chunk

    service = ProxyService(ConnectingUpstream(), driver)

    async def turn(i: int) -> None:
        body = copy.deepcopy(VAPI)
        prepared = await service.prepare(f"burst-{i}", body["messages"])
        async for _ in service.stream(prepared.request, call_id=f"burst-{i}"):
            pass

    burst = 30
    async with server:
        await asyncio.gather(*(turn(i) for i in range(burst)))
    assert decided == burst and len(decided_when_sent) == burst
    # The first request went out with a few decisions made, not all thirty; half were out before the last decision.
    assert decided_when_sent[0] <= 5
    assert sorted(decided_when_sent)[burst // 2] < burst
