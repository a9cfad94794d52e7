"""``ChecklistDirector``: a Pipecat processor that tells the model the next question.

It sits between the user aggregator and the LLM. Before each model run
(``LLMContextFrame`` going downstream) it hands the caller turns in the
context to the :class:`~pipecat_harness.checklist.driver.ChecklistDriver`,
removes earlier directives from the context by line prefix, and appends the
new directive as the last system block.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_harness.checklist.directive import DEFAULT_MARKER, Directive
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.prompt import strip_directives, user_turns

__all__ = ["ChecklistDirector"]



class ChecklistDirector(FrameProcessor):
    """Places the checklist directive as the last system block before every LLM run.

    Args:
        driver: The checklist driver holding the per-call state.
        call_id: The call this pipeline serves.
        marker: Prefix of every directive line.
        **kwargs: Passed to ``FrameProcessor``.
    """

    def __init__(self, driver: ChecklistDriver, *, call_id: str, marker: str = DEFAULT_MARKER, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.driver = driver
        self.call_id = call_id
        self.marker = marker
        self.last_directive: Directive | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Direct every downstream ``LLMContextFrame``; forward everything."""
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM and not frame.speculation:
            await self._direct(frame)
        await self.push_frame(frame, direction)

    async def _direct(self, frame: LLMContextFrame) -> None:
        context = frame.context
        messages = list(context.get_messages())
        try:
            sync = asyncio.ensure_future(self.driver.sync(self.call_id, user_turns(messages), stamp=time.time()))
            hold_time_for = getattr(asyncio.get_running_loop(), "hold_time_for", None)
            if self.driver.store.remote and callable(hold_time_for):
                # On a simulated (virtual-time) loop, time must not jump ahead while a
                # remote store answers, or the work timeout would fire spuriously.
                hold_time_for(sync)
            directive = await sync
            if directive is None:
                directive = await self.driver.current_directive(self.call_id)
        except Exception as exc:
            # The model must still answer the caller: keep the context as it is.
            logger.warning(f"checklist driver failed for call {self.call_id}: {exc}")
            self.driver.record("driver_error", {"error": f"{type(exc).__name__}: {exc}"})
            return
        cleaned, _ = strip_directives(messages, self.marker)
        cleaned.append({"role": "system", "content": directive.render(self.marker)})
        context.set_messages(cleaned)
        self.last_directive = directive
