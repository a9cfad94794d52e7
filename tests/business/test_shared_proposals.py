"""A pending proposal outlives its worker: another worker (or a restart) confirms or replaces it.

Each test plays two workers of one call, each with its own ConfirmationPolicy
and ToolGate, sharing only the proposal store: SQLite (a file), PostgreSQL,
Redis, or the in-process store. A confirmed write runs once; a correction on
one worker replaces the proposal the other holds.
"""

import uuid
from collections.abc import AsyncIterator

import pytest

from pipecat_harness.business.confirmation import ConfirmationPolicy
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.proposals import ProposalStore, SqlProposals, StateStoreProposals
from pipecat_harness.tools.gate import ToolGate
from pipecat_harness.tools.policy import PolicySet
from tests.services import REDIS_URL, connected_redis, postgres_url

THURSDAY = {"day": "Thursday", "time": "18:00"}
FRIDAY = {"day": "Friday", "time": "18:00"}


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def stores(request, tmp_path, redis_prefix) -> AsyncIterator[tuple[ProposalStore, ProposalStore]]:
    """Two handles on one shared proposal store (one per worker)."""
    if request.param == "memory":
        shared = MemoryStateStore()
        yield StateStoreProposals(shared), StateStoreProposals(shared)
        return
    if request.param == "redis":
        from pipecat_harness.state.redis_store import RedisStateStore

        async with connected_redis(redis_prefix) as first:
            second = RedisStateStore(REDIS_URL, prefix=redis_prefix)
            yield StateStoreProposals(first), StateStoreProposals(second)
            await second.close()
        return
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}" if request.param == "sqlite" else postgres_url()
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    a, b = SqlProposals(url, table_prefix=prefix), SqlProposals(url, table_prefix=prefix)
    yield a, b
    await a.drop()
    await a.close()
    await b.close()


class Worker:
    """One worker's view of the call: its own policy and gate, the shared store."""

    def __init__(self, store: ProposalStore, backend: list[dict]) -> None:
        self.policy = ConfirmationPolicy(["schedule_callback"], store=store, call_id="call-7")
        self.gate = ToolGate(write_tools={"schedule_callback"}, session_id="call-7",
                             policies=PolicySet([self.policy.rule()]))
        self.backend = backend

    async def caller(self, turn: int, text: str) -> None:
        self.gate.new_turn(turn)
        self.policy.caller_turn(turn, text)

    async def heard(self, turn: int, text: str) -> None:
        self.policy.assistant_heard(turn, text)
        await self.policy.save()  # what the control does when a reply was heard while a proposal is pending

    async def request(self, arguments: dict) -> str:
        async def book(args):
            self.backend.append(dict(args))
            return {"status": "booked", **args}

        await self.policy.sync()  # what the gate hook does before the gate decides
        result = await self.gate.call("schedule_callback", arguments, book)
        await self.policy.save()  # and after
        return result.status.value


async def test_a_restarted_worker_confirms_the_proposal_the_caller_heard(stores):
    backend: list[dict] = []
    first, second = Worker(stores[0], backend), Worker(stores[1], backend)
    await first.caller(1, "Please book the callback for Thursday at six.")
    assert await first.request(THURSDAY) == "not_executed"
    assert [p.proposal_id for p in first.policy.pending()] == ["proposal-1"]
    await first.heard(1, "Thursday at six. Shall I book it?")

    # The first worker is gone; the caller's "yes" (to the read-back it played) reaches the second one.
    await second.caller(2, "Yes, please.")
    assert await second.request(THURSDAY) == "executed"
    assert backend == [THURSDAY]
    confirmed = next(p for p in second.policy.proposals if p.proposal_id == "proposal-1")
    assert confirmed.status == "confirmed" and confirmed.confirmed_text == "Yes, please."
    await first.policy.sync()
    assert first.policy.pending() == []  # every worker sees it is no longer pending


async def test_a_correction_on_one_worker_replaces_the_proposal_every_worker_holds(stores):
    backend: list[dict] = []
    first, second = Worker(stores[0], backend), Worker(stores[1], backend)
    await first.caller(1, "Book a callback for Thursday at six.")
    await first.request(THURSDAY)

    await second.caller(2, "Sorry, make it Friday.")
    assert await second.request(FRIDAY) == "not_executed"
    pending = second.policy.pending()
    assert [(p.proposal_id, p.arguments["day"]) for p in pending] == [("proposal-2", "Friday")]
    replaced = next(p for p in second.policy.proposals if p.proposal_id == "proposal-1")
    assert replaced.status == "superseded" and replaced.superseded_by == "proposal-2"
    await second.heard(2, "Friday at six then. Shall I book it?")

    # Back on the first worker: a "yes" now confirms Friday, and the stale Thursday request is a new proposal.
    await first.caller(3, "Yes, that's right.")
    assert await first.request(THURSDAY) == "not_executed"
    assert backend == []
    await first.heard(3, "Thursday at six, is that right?")
    await second.caller(4, "No, Friday please.")  # declines the Thursday proposal
    await second.request(FRIDAY)
    await second.heard(4, "Friday at six. Shall I book it?")
    await second.caller(5, "Yes.")
    assert await second.request(FRIDAY) == "executed"
    assert backend == [FRIDAY]


async def test_without_a_store_a_second_worker_would_ask_again():
    # The in-worker default: nothing is shared, so the second worker only proposes (fails closed).
    backend: list[dict] = []
    first = Worker.__new__(Worker)
    first.policy = ConfirmationPolicy(["schedule_callback"])
    first.gate = ToolGate(write_tools={"schedule_callback"}, session_id="c", policies=PolicySet([first.policy.rule()]))
    first.backend = backend
    await first.caller(1, "Thursday at six.")
    await first.request(THURSDAY)
    second = Worker.__new__(Worker)
    second.policy = ConfirmationPolicy(["schedule_callback"])
    second.gate = ToolGate(write_tools={"schedule_callback"}, session_id="c",
                           policies=PolicySet([second.policy.rule()]))
    second.backend = backend
    await second.caller(2, "Yes.")
    assert await second.request(THURSDAY) == "not_executed" and backend == []


async def test_concurrent_saves_do_not_both_win(stores):
    first = ConfirmationPolicy(["schedule_callback"], store=stores[0], call_id="call-9")
    second = ConfirmationPolicy(["schedule_callback"], store=stores[1], call_id="call-9")
    first.caller_turn(1, "Thursday")
    second.caller_turn(1, "Thursday")
    assert await first.save() is True
    assert await second.save() is False and second.conflicts  # based on version 0, the store is at 1
    assert await second.save() is True  # after adopting the stored document, its own turn is saved on top
    document, version = await stores[0].load("call-9")
    assert version == 2 and document["turns"] == {"1": "Thursday"}


async def test_a_corrupt_stored_document_is_reported_not_raised(tmp_path):
    shared = MemoryStateStore()
    await shared.set_json("proposals:call-1", {"version": 1, "document": {"proposals": [{"tool": "x"}]}})
    policy = ConfirmationPolicy(["schedule_callback"], store=StateStoreProposals(shared), call_id="call-1")
    await policy.sync()  # logged, and the worker keeps asking for confirmation
    assert policy.pending() == []
