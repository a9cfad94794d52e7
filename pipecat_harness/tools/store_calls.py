"""The gate's ledger writes: bounded by the tool's deadline, safe against cancellation, retried off the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from pipecat_harness.tools.execution import await_deadline, spawn
from pipecat_harness.tools.operation_state import IdempotencyConflict, InvalidTransition, ResourceBusy

__all__ = ["StoreTimeout", "owned", "retrying", "transient"]

T = TypeVar("T")


class StoreTimeout(TimeoutError):
    """The ledger did not answer within the tool's deadline."""


def transient(exc: BaseException) -> bool:
    """Whether a failed ledger write may succeed if tried again (the database, not the state machine, said no)."""
    return isinstance(exc, Exception) and not isinstance(exc, InvalidTransition | IdempotencyConflict | ResourceBusy)


async def retrying(write: Callable[[], Awaitable[T]], *, within_secs: float) -> T:
    """Run ``write()``; while the database (not the state machine) refuses it, retry with back-off ``within_secs``."""
    try:
        return await write()
    except Exception as exc:
        if not transient(exc) or within_secs <= 0:
            raise
    stop, backoff = stop_after_delay(within_secs), wait_exponential(multiplier=0.05, max=2.0)
    async for attempt in AsyncRetrying(stop=stop, retry=retry_if_exception(transient), wait=backoff, reraise=True):
        with attempt:
            return await write()
    raise AssertionError("unreachable")  # pragma: no cover - tenacity returns or raises


async def owned(write: Awaitable[T], timeout_secs: float | None, abandon: Callable[[asyncio.Future[T]], Any], *,
                inline: bool = False) -> T:
    """Run a write that may make the caller an owner (start, claim), waiting at most ``timeout_secs``.

    In a task of its own (in place if ``inline``; none for a store's future, begun already): if the caller is cancelled
    or gives up (``StoreTimeout``), ``abandon`` is handed the write still under way, to undo what it commits.
    """
    if inline:
        return await write
    task, ended = (write, None) if isinstance(write, asyncio.Future) else spawn(lambda: write)
    try:
        outcome = await await_deadline(task, timeout_secs, ended)
    except asyncio.CancelledError:
        abandon(task)
        raise
    if outcome.timed_out:
        abandon(task)
        raise StoreTimeout(f"the ledger did not answer within {timeout_secs:g}s")
    if outcome.exception is not None:
        raise outcome.exception
    return outcome.value  # type: ignore[no-any-return]
