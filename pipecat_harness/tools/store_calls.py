"""The gate's ledger writes: bounded by the tool's deadline, safe against cancellation, retried off the loop.

* :func:`retrying` runs a write once and, if the database failed, again with
  exponential back-off (tenacity) for a bounded time; a state-machine refusal
  is not retried.
* :func:`owned` runs a write that may make the gate the owner of a record
  (start, claim) in its own task (in place if ``inline``: it never suspends;
  none if the store handed a future, begun already and resolved whether or
  not anyone waits): the caller waits at most the tool's deadline; if it is
  cancelled or gives up, ``abandon`` is handed the write still under way, to
  undo what it commits, so nothing is left ``executing`` with no handler
  behind it.
"""

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
    """Run ``write()``; while the database fails, try again with back-off for at most ``within_secs``.

    Raises:
        Exception: The last failure, once the time is up (or a non-transient one at once).
    """
    try:
        return await write()
    except Exception as exc:
        if not transient(exc) or within_secs <= 0:
            raise
    async for attempt in AsyncRetrying(stop=stop_after_delay(within_secs), retry=retry_if_exception(transient),
                                       wait=wait_exponential(multiplier=0.05, max=2.0), reraise=True):
        with attempt:
            return await write()
    raise AssertionError("unreachable")  # pragma: no cover - tenacity returns or raises


async def owned(write: Awaitable[T], timeout_secs: float | None,
                abandon: Callable[[asyncio.Future[T]], Any], *, inline: bool = False) -> T:
    """Run a write that may make the caller an owner, waiting at most ``timeout_secs``.

    Raises:
        StoreTimeout: No answer in time (``abandon`` is handed the write, still running).
        asyncio.CancelledError: The caller was cancelled (likewise).
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
