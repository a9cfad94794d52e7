"""Running a handler with a deadline, and following the late replies of timed-out writes.

A handler runs in its own task, so a deadline never cancels a write halfway: the caller is told the outcome is
unknown while the task goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from loguru import logger

from pipecat_harness.tools.operation_state import OperationRecord

__all__ = ["HandlerOutcome", "LateReplies", "await_deadline", "current_operation", "describe_error", "reports_error",
           "spawn"]

T = TypeVar("T")

_operation: contextvars.ContextVar[OperationRecord | None] = contextvars.ContextVar("_current_operation", default=None)


def current_operation() -> OperationRecord | None:
    """Return the operation a write handler is executing (pass its key on to the backend)."""
    return _operation.get()


def spawn(start: Callable[[], Awaitable[T]],
          operation: OperationRecord | None = None) -> tuple[asyncio.Future[T], asyncio.Future[None]]:
    """Run ``start()`` in a task, ``operation`` as its :func:`current_operation`; also return a future set as it ends.

    That future resolves a loop turn sooner than the task, and awaiting or cancelling it leaves the task alone.
    """
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def run(work: Awaitable[T]) -> T:
        try:
            return await work
        finally:
            if not ended.done():
                ended.set_result(None)

    token = _operation.set(operation)
    try:
        work = start()
        if not inspect.isawaitable(work):  # as asyncio.ensure_future would, before anything runs
            raise TypeError("An asyncio.Future, a coroutine or an awaitable is required")
        return asyncio.ensure_future(run(work)), ended
    finally:
        _operation.reset(token)


def reports_error(result: Any) -> bool:
    """Default failure test: a mapping result with a non-empty ``error`` field."""
    return isinstance(result, dict | Mapping) and bool(result.get("error"))


@dataclass
class HandlerOutcome:
    """What became of one handler run (``error``: ``"Type: message"``; ``task``: still running if timed out)."""

    task: asyncio.Future[Any]
    value: Any = None
    error: str | None = None
    timed_out: bool = False
    exception: BaseException | None = None


def describe_error(exc: BaseException) -> str:
    """Return ``"Type: message"`` for an exception."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _settled(task: asyncio.Future[Any]) -> HandlerOutcome:
    if task.cancelled():
        error = "CancelledError: the handler was cancelled"
        return HandlerOutcome(task, error=error, exception=asyncio.CancelledError())
    exc = task.exception()
    if exc is not None:
        return HandlerOutcome(task, error=describe_error(exc), exception=exc)
    return HandlerOutcome(task, value=task.result())


async def await_deadline(task: asyncio.Future[Any], timeout_secs: float | None,
                         ended: asyncio.Future[None] | None = None) -> HandlerOutcome:
    """Wait at most ``timeout_secs`` for a running handler task, never cancelling it (cancelling the wait neither).

    ``ended``: the future :func:`spawn` gave with the task (awaited once). One future and one timer instead of
    :func:`asyncio.wait`'s bookkeeping: this is on every write's path.
    """
    if not task.done():
        loop = asyncio.get_running_loop()
        waiter = ended or loop.create_future()

        def wake(_: Any = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        if ended is None:  # a callback left on the task after a cancellation is harmless
            task.add_done_callback(wake)
        timer = None if timeout_secs is None else loop.call_later(timeout_secs, wake)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
        if not task.done():
            return HandlerOutcome(task, timed_out=True)
    return _settled(task)


class LateReplies:
    """Follows handlers past their deadline until they return, never cancelling one (its request may still land)."""

    def __init__(self) -> None:
        self._watchers: set[asyncio.Task[None]] = set()

    def watch(self, follow: Awaitable[None]) -> None:
        """Run ``follow`` (which awaits a handler and records its outcome) in the background."""
        watcher = asyncio.ensure_future(self._run(follow))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    @staticmethod
    async def _run(follow: Awaitable[None]) -> None:
        try:
            await follow
        except Exception:
            logger.exception("recording a late tool reply failed")

    @property
    def pending(self) -> int:
        """Timed-out handlers still followed."""
        return len(self._watchers)

    async def wait(self) -> None:
        """Wait until every followed handler returned and its outcome was recorded."""
        while self._watchers:
            await asyncio.gather(*list(self._watchers), return_exceptions=True)
