"""Counting what a call asks of its model, from the frames Pipecat's LLM service pushes.

For a networked model the meter also freezes virtual time from the context to the response's end (or its first tool
call), so the caller does not give up before the answer; a request that streams nothing for ``max_hold_secs`` of real
time lets virtual time run again, so the service's own timeouts apply.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed

from pipecat_harness.sim.call_result import ModelUsage
from pipecat_harness.sim.scripted_llm import ModelCall

__all__ = ["ModelMeter"]

_TOKENS = ("prompt_tokens", "completion_tokens", "total_tokens")


class ModelMeter(BaseObserver):
    """Requests, tokens and reply text of one LLM service in a call.

    Args:
        llm: The service to meter.
        hold_time: Freeze the loop's virtual time while a request is in flight (a remote model).
        max_hold_secs: Real seconds without a streamed frame after which a request no longer holds time.
    """

    def __init__(self, llm: Any, *, hold_time: bool = False, max_hold_secs: float = 30.0) -> None:
        super().__init__(observe_every_push=False)
        self._llm = llm
        self._hold_time = hold_time
        self._max_hold_secs = max_hold_secs
        self._held: asyncio.Future[None] | None = None
        self._watchdog: threading.Timer | None = None
        self._last_frame = 0.0
        self._counts: Counter[str] = Counter()  # by ModelUsage field
        self.calls: list[ModelCall] = []

    @property
    def usage(self) -> ModelUsage:
        """The call's totals."""
        return ModelUsage(**self._counts)

    async def on_process_frame(self, data: FrameProcessed) -> None:
        """A context reaching the service starts a request; an interruption or the end releases time."""
        if data.processor is not self._llm:
            return
        if isinstance(data.frame, LLMContextFrame):
            self._hold()
        elif isinstance(data.frame, (InterruptionFrame, EndFrame, CancelFrame)):
            self._release()

    async def on_push_frame(self, data: FramePushed) -> None:
        """Count responses, usage metadata and streamed text of the service."""
        if data.source is not self._llm:
            return
        frame = data.frame
        if isinstance(frame, LLMFullResponseStartFrame):
            self._counts["requests"] += 1
            self.calls.append(ModelCall(messages=[], decision_index=None))
        elif isinstance(frame, LLMTextFrame) and self.calls:
            self.calls[-1].text += frame.text
            self._counts["streamed_chars"] += len(frame.text)
            self._last_frame = time.perf_counter()  # the wait for the next frame starts now
        elif isinstance(frame, MetricsFrame):
            for item in frame.data:
                if isinstance(item, LLMUsageMetricsData):
                    self._counts.update(reported=1, **{name: getattr(item.value, name) for name in _TOKENS})
        elif isinstance(frame, FunctionCallsStartedFrame):
            self._release()
        elif isinstance(frame, LLMFullResponseEndFrame):
            if self.calls:
                self.calls[-1].completed = True
            self._release()

    def _hold(self) -> None:
        loop = asyncio.get_running_loop()
        hold = getattr(loop, "hold_time_for", None)
        if not self._hold_time or self._held is not None or hold is None:
            return
        held: asyncio.Future[None] = loop.create_future()
        self._held = held
        hold(held)
        self._last_frame = time.perf_counter()
        self._start_watchdog(loop, held, self._max_hold_secs)

    def _start_watchdog(self, loop: asyncio.AbstractEventLoop, held: asyncio.Future[None], secs: float) -> None:
        # A real-time watchdog (the loop's own timers stand still while time is held).
        self._watchdog = threading.Timer(secs, loop.call_soon_threadsafe, (self._check_idle, loop, held))
        self._watchdog.daemon = True
        self._watchdog.start()

    def _check_idle(self, loop: asyncio.AbstractEventLoop, held: asyncio.Future[None]) -> None:
        if held.done() or self._held is not held:
            return
        idle = time.perf_counter() - self._last_frame
        if idle >= self._max_hold_secs:
            held.set_result(None)
        else:
            self._start_watchdog(loop, held, self._max_hold_secs - idle)

    def _release(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._held is not None and not self._held.done():
            self._held.set_result(None)
        self._held = None
