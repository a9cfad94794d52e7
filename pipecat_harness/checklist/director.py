"""``ChecklistDirector``: a Pipecat processor that tells the model the next question.

Before each model run it syncs the driver and delivers the directive as system instruction: with an
``LLMService`` downstream through an ``LLMUpdateSettingsFrame`` (a later system message would reach Gemini,
Anthropic and Bedrock as a user message, and the instruction stays in force for runs after tool results);
without one, as the context's last system message. Earlier directives are removed by line prefix.
"""

from __future__ import annotations

import time
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, LLMContextFrame, LLMUpdateSettingsFrame, StartFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings

from pipecat_harness._pipecat import base_system_instruction
from pipecat_harness.checklist.directive import DEFAULT_MARKER, Directive
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.prompt import strip_directive_text, strip_directives, user_turns
from pipecat_harness.control import find_downstream

__all__ = ["ChecklistDirector", "compose_instruction"]


def compose_instruction(base: str | None, directive: str, marker: str) -> str:
    """The system instruction ``base`` (earlier directive lines removed) followed by ``directive``."""
    kept = strip_directive_text(base or "", marker).strip()
    return f"{kept}\n\n{directive}" if kept else directive


class ChecklistDirector(FrameProcessor):
    """Delivers the checklist directive as system instruction before every LLM run.

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
        self.llm: LLMService[Any] | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Direct every downstream ``LLMContextFrame``; forward everything."""
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self.llm = self.llm or find_downstream(self, LLMService)
        if isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM and not frame.speculation:
            await self._direct(frame)
        await self.push_frame(frame, direction)

    async def _direct(self, frame: LLMContextFrame) -> None:
        context = frame.context
        messages = list(context.get_messages())
        try:
            directive = await self.driver.sync(self.call_id, user_turns(messages), stamp=time.time())
            if directive is None:
                directive = await self.driver.current_directive(self.call_id)
        except Exception as exc:
            # The model must still answer the caller: keep the context as it is.
            logger.warning(f"checklist driver failed for call {self.call_id}: {exc}")
            self.driver.record("driver_error", {"error": f"{type(exc).__name__}: {exc}"})
            return
        cleaned, _ = strip_directives(messages, self.marker)
        rendered = directive.render(self.marker)
        if self.llm is None:
            cleaned.append({"role": "system", "content": rendered})
        else:
            # The base prompt, not Pipecat's composed instruction: a settings update replaces the base (addons follow).
            instruction = compose_instruction(base_system_instruction(self.llm), rendered, self.marker)
            # Queued ahead of the context frame, so the LLM applies it before this run.
            await self.push_frame(LLMUpdateSettingsFrame(delta=LLMSettings(system_instruction=instruction),
                                                         service=self.llm))
        context.set_messages(cleaned)
        self.last_directive = directive
