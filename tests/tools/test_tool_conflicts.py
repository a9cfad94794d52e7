"""A different write on the same resource waits while an earlier one is in flight or unknown."""

import asyncio

from pipecat_harness.tools import OperationStatus, Reconciliation, ToolGate


def _gate(**kwargs) -> ToolGate:
    return ToolGate(write_tools={"book_callback"}, resources={"book_callback": lambda args: "the callback"},
                    timeout_secs=0.05, late_reply_secs=1.0, **kwargs)


async def test_a_different_booking_is_held_while_the_first_is_unknown_then_told_it_went_through():
    booked: list[str] = []

    async def book(args):
        if args["day"] == "Thursday":
            await asyncio.sleep(0.2)  # answers after the deadline
        booked.append(args["day"])
        return {"status": "callback booked", "day": args["day"]}

    gate = _gate()
    assert (await gate.call("book_callback", {"day": "Thursday"}, book)).status == "outcome_unknown"
    held = await gate.call("book_callback", {"day": "Friday"}, book)
    assert held.status == "not_executed" and held.reason_kind == "conflict"
    assert "checking whether it went through" in held.reason and booked == []
    await gate._late.wait()  # Thursday's late reply settles it
    news = await gate.call("book_callback", {"day": "Friday"}, book)
    assert news.status == "not_executed" and "went through after all" in news.reason
    assert booked == ["Thursday"]


async def test_a_reconciler_that_finds_nothing_lets_the_new_write_through_once_no_handler_runs():
    booked: list[str] = []

    async def book(args):
        if args["day"] == "Thursday":
            raise ConnectionResetError("connection reset")  # ambiguous: unknown
        booked.append(args["day"])
        return {"status": "callback booked"}

    async def reconciler(record):
        return Reconciliation(OperationStatus.FAILED, error="no such booking", voided=record.attempt)

    gate = _gate(reconciler=reconciler)
    first = await gate.call("book_callback", {"day": "Thursday"}, book)
    assert first.status == "failed"  # reconciled at once: the handler has stopped and the backend has nothing
    assert (await gate.call("book_callback", {"day": "Friday"}, book)).status == "executed"
    assert booked == ["Friday"]


async def test_writes_on_other_resources_are_not_held():
    async def slow(args):
        await asyncio.sleep(0.2)
        return {"ok": True}

    gate = ToolGate(write_tools={"cancel_order"}, resources={"cancel_order": lambda args: f"order {args['order']}"},
                    timeout_secs=0.05, late_reply_secs=1.0)
    assert (await gate.call("cancel_order", {"order": "#W1"}, slow)).status == "outcome_unknown"
    assert (await gate.call("cancel_order", {"order": "#W2"}, slow)).status == "outcome_unknown"  # ran
    await gate.close()
