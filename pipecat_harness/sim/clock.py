"""Virtual time for simulated calls: the frame order and timing of a real call, in a fraction of the wall time.

Scaling durations would change frame order (many Pipecat constants cannot be scaled), so the event loop runs on virtual
time instead: whenever nothing is runnable, it jumps straight to its next timer. Made to follow it: the pipeline clock
(``LoopClock``), ``time.time()`` (through ``time-machine``: bot-speaking ticks, VAD timestamps, metrics) and
``time.monotonic()`` in the VAD controller and Smart Turn. Executor threads, aiosqlite's thread and the stores' replies
freeze virtual time until they complete, so runs are deterministic (inference takes zero virtual time).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import importlib
import inspect
import selectors
import time
import types
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future as ConcurrentFuture
from typing import Any, TypeVar
from unittest import mock

import time_machine
from pipecat.clocks.base_clock import BaseClock

__all__ = ["LoopClock", "VirtualTimeGuardError", "VirtualTimeLoop", "run_on_virtual_time", "virtual_time"]

#: Virtual wall-clock time at which every simulated call starts (deterministic traces).
SIMULATION_EPOCH = _dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=_dt.UTC)

# Modules that read time.monotonic() next to asyncio sleeps.
_MONOTONIC_MODULES = ("pipecat.audio.vad.vad_controller", "pipecat.audio.turn.smart_turn.base_smart_turn")
_Advance = Callable[[float], None]
_T = TypeVar("_T")


class VirtualTimeGuardError(RuntimeError):
    """Raised when a simulated call exceeds its virtual or wall-clock budget."""


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose clock jumps to the next timer when idle.

    Past ``max_virtual_secs`` or ``max_wall_secs`` it raises (a scenario that never ends is an error, not a hang);
    ``on_advance`` is called with the virtual seconds skipped.
    """

    def __init__(self, *, max_virtual_secs: float = 3600.0, max_wall_secs: float = 120.0,
                 on_advance: _Advance | None = None) -> None:
        super().__init__(selectors.DefaultSelector())
        self._virtual_now = 0.0
        self._max_virtual_secs = max_virtual_secs
        self._max_wall_secs = max_wall_secs
        self._wall_started = time.perf_counter()
        self._on_advance = on_advance
        self._pending_executor: set[ConcurrentFuture[Any] | asyncio.Future[Any]] = set()
        real_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[Any]:
            ready = real_select(0)
            if ready or timeout == 0:
                return ready
            if self._pending_executor or timeout is None:
                # A thread or real I/O must make progress: wait a real slice without advancing virtual time.
                self._check_wall_budget()
                return real_select(0.002)
            self._advance(timeout)
            return []

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        """Return the virtual time in seconds."""
        return self._virtual_now

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:  # type: ignore[override]
        """Run ``func`` in an executor and freeze virtual time until it completes."""
        future = super().run_in_executor(executor, func, *args)
        self.hold_time_for(future)
        return future

    def hold_time_for(self, future: asyncio.Future[Any]) -> None:
        """Freeze virtual time until ``future`` (completed by another thread) is done."""
        if not future.done():
            self._pending_executor.add(future)
            future.add_done_callback(self._pending_executor.discard)

    def _advance(self, seconds: float) -> None:
        if self._virtual_now + seconds > self._max_virtual_secs:
            raise VirtualTimeGuardError(f"simulated call exceeded {self._max_virtual_secs:.0f} s of virtual time")
        self._check_wall_budget()
        target = self._virtual_now + seconds
        scheduled = getattr(self, "_scheduled", None)
        if scheduled:  # land exactly on the next timer so float rounding cannot leave it pending
            target = max(target, scheduled[0].when())
        skipped, self._virtual_now = target - self._virtual_now, target
        if self._on_advance is not None:
            self._on_advance(skipped)

    def _check_wall_budget(self) -> None:
        if time.perf_counter() - self._wall_started > self._max_wall_secs:
            raise VirtualTimeGuardError(f"simulated call exceeded {self._max_wall_secs:.0f} s of wall-clock time")


class LoopClock(BaseClock):
    """Pipeline clock reading the running loop's time in ns (virtual on a ``VirtualTimeLoop``, else monotonic)."""

    def __init__(self) -> None:
        self._start = 0.0

    def start(self) -> None:
        """Record the start of the clock."""
        self._start = asyncio.get_running_loop().time()

    def get_time(self) -> int:
        """Return nanoseconds since :meth:`start`."""
        return int((asyncio.get_running_loop().time() - self._start) * 1e9)


@contextlib.contextmanager
def virtual_time(*, max_virtual_secs: float = 3600.0, max_wall_secs: float = 120.0) -> Iterator[VirtualTimeLoop]:
    """Yield a virtual-time loop, the wall clock and monotonic readers following it (run it with ``asyncio.Runner``)."""
    with contextlib.ExitStack() as stack:
        coordinates = stack.enter_context(time_machine.travel(SIMULATION_EPOCH, tick=False))
        loop = VirtualTimeLoop(max_virtual_secs=max_virtual_secs, max_wall_secs=max_wall_secs,
                               on_advance=coordinates.shift)
        stack.callback(lambda: None if loop.is_closed() else loop.close())
        _patch_monotonic(stack, loop)
        _track_aiosqlite_threads(stack)
        _hold_time_for_store_io(stack)
        yield loop


def run_on_virtual_time(main: Coroutine[Any, Any, _T], *, max_virtual_secs: float, max_wall_secs: float) -> _T:
    """Run ``main`` to completion on a fresh :func:`virtual_time` loop."""
    with virtual_time(max_virtual_secs=max_virtual_secs, max_wall_secs=max_wall_secs) as loop:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(main)


def _patch_monotonic(stack: contextlib.ExitStack, loop: VirtualTimeLoop) -> None:
    shim = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("__")})
    shim.monotonic = loop.time
    shim.monotonic_ns = lambda: int(loop.time() * 1e9)
    for name in _MONOTONIC_MODULES:
        with contextlib.suppress(ImportError):
            stack.enter_context(mock.patch.object(importlib.import_module(name), "time", shim))


def _hold(loop: asyncio.AbstractEventLoop, work: asyncio.Future[Any]) -> None:
    if isinstance(loop, VirtualTimeLoop):
        loop.hold_time_for(work)


class _TrackedQueue:
    """Wraps aiosqlite's request queue so the loop waits for its worker thread."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def put_nowait(self, item: Any) -> None:
        future = item[0] if isinstance(item, tuple) and item else None
        if isinstance(future, asyncio.Future):
            _hold(future.get_loop(), future)
        self._queue.put_nowait(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def _track_aiosqlite_threads(stack: contextlib.ExitStack) -> None:
    """Make aiosqlite's per-connection thread (which completes futures itself, not through an executor) hold time."""
    try:
        from aiosqlite import core
    except ImportError:
        return
    original_init = core.Connection.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._tx = _TrackedQueue(self._tx)

    stack.enter_context(mock.patch.object(core.Connection, "__init__", init))


# Store I/O whose reply arrives on a socket or from a thread: a loop waiting for it looks idle, so without a hold the
# virtual clock would jump to the next timer (a tool's deadline, a lease) while the database or Redis answers.
_HELD_IO = (
    ("redis.asyncio.connection", "AbstractConnection", ("connect", "read_response")),
    ("pipecat_harness.tools.sqlite_thread", "SqliteThread", ("submit",)),  # run() too: it awaits submit()
    ("pipecat_harness.tools.ledger_store", "PostgresStore", ("now", "insert", "update", "get", "select")),
    ("pipecat_harness.tools.ledger", "OperationLedger", ("create_tables",)),
    ("pipecat_harness.state.proposals", "SqlProposals", ("load", "save")),
)


def _hold_time_for_store_io(stack: contextlib.ExitStack) -> None:
    """Make each of :data:`_HELD_IO`'s methods hold virtual time until its reply is in."""

    def holding(original: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.iscoroutinefunction(original):  # returns a future, resolved from another thread

            def hand(self: Any, *args: Any, **kwargs: Any) -> Any:
                work = original(self, *args, **kwargs)
                _hold(asyncio.get_running_loop(), work)
                return work

            return hand

        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            work = asyncio.ensure_future(original(self, *args, **kwargs))
            _hold(asyncio.get_running_loop(), work)
            return await work

        return call

    for module_name, class_name, methods in _HELD_IO:
        try:
            owner = getattr(importlib.import_module(module_name), class_name)
        except ImportError:  # an optional extra (Redis, the stores) that is not installed holds nothing
            continue
        for name in methods:
            stack.enter_context(mock.patch.object(owner, name, holding(getattr(owner, name))))
