"""``ChecklistDirector``: a Pipecat processor that tells the model the next question.

It sits between the user aggregator and the LLM. Before each model run
(``LLMContextFrame`` going downstream) it hands the caller turns in the
context to the :class:`~pipecat_harness.checklist.driver.ChecklistDriver`
and delivers the new directive as *system instruction*:

* with an ``LLMService`` downstream, the directive is composed onto the
  service's own system instruction through an ``LLMUpdateSettingsFrame``
  queued right before the context frame. Every provider adapter sends the
  system instruction as instruction (Gemini's ``system_instruction``,
  Anthropic's ``system``, OpenAI's leading system message), whereas a system
  message placed later in the context reaches Gemini, Anthropic and Bedrock
  as a *user* message. The instruction also stays in force for the model
  runs that follow tool results, whose context frames travel upstream
  from the assistant aggregator and never pass this processor.
* with no LLM service downstream (a processor tested on its own, a pipeline
  whose model sits in a sub-pipeline), the directive is appended as the last
  system message of the context, as an OpenAI-format model reads it.

Earlier directives are removed from the context by line prefix in both cases.
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


def _base_instruction(llm: LLMService[Any]) -> str | None:
    # Pipecat composes the effective instruction from the user's base prompt
    # plus its own addons (async-tool guidance...); the base is what a settings
    # update replaces, so the directive is composed onto the base, not onto the
    # composed text (which would repeat the addons).
    if isinstance(llm, LLMService):
        return base_system_instruction(llm)
    value = getattr(llm.settings, "system_instruction", None)
    return value if isinstance(value, str) else None


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
            instruction = compose_instruction(_base_instruction(self.llm), rendered, self.marker)
            # Queued ahead of the context frame, so the LLM applies it before this run.
            await self.push_frame(
                LLMUpdateSettingsFrame(delta=LLMSettings(system_instruction=instruction), service=self.llm)
            )
        context.set_messages(cleaned)
        self.last_directive = directive
