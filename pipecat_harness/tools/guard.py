"""``GenerationGuard``: which tool calls come from a generation that was interrupted, and notes to the model."""

from __future__ import annotations

from typing import Any

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMContextFrame,
    StartFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_harness.control import find_downstream
from pipecat_harness.instruction import InstructionEntry

__all__ = ["GenerationGuard"]


class GenerationGuard(FrameProcessor):
    """After the user aggregator: tracks interruptions and issued calls, and delivers notes at a generation's start.

    A call from a generation interrupted before the LLM announced it (``FunctionCallsStartedFrame``) is not executed.
    ``on_unknown_tool(name, tool_call_id)`` hears every announced call; the ``notices`` (writes settled after the model
    was told their outcome was unknown) go into the downstream LLM's system instruction, else a developer note.
    """

    #: The frames it watches, besides the lifecycle frames (the start, interruptions).
    handled_frames: tuple[type[Frame], ...] = (LLMContextFrame, FunctionCallResultFrame, FunctionCallsStartedFrame)

    def __init__(self, on_unknown_tool: Any = None, notices: Any = None, on_lifecycle: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**{"enable_direct_mode": True, **kwargs})
        self._on_lifecycle = on_lifecycle
        self.interruptions = 0
        self._mark = 0
        self._issued: set[str] = set()
        self._on_unknown_tool = on_unknown_tool
        self._notices = notices
        self._instruction: InstructionEntry | None = None

    def may_run(self, tool_call_id: str) -> bool:
        """Whether a call may execute: announced, or no interruption since its generation started."""
        return tool_call_id in self._issued or self.interruptions == self._mark

    def generation_started(self) -> None:
        """Mark the start of a generation (tests and non-pipeline callers)."""
        self._mark = self.interruptions

    def interrupted(self) -> None:
        """Note an interruption."""
        self.interruptions += 1

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Watch frames; forward all of them unchanged."""
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            if self._instruction is None:
                llm = find_downstream(self, LLMService)
                self._instruction = InstructionEntry(llm) if llm is not None else None
            if self._on_lifecycle is not None:
                self._on_lifecycle(True)
        elif isinstance(frame, EndFrame | CancelFrame) and self._on_lifecycle is not None:
            self._on_lifecycle(False)
        if isinstance(frame, InterruptionFrame):
            self.interrupted()
        elif isinstance(frame, LLMContextFrame | FunctionCallResultFrame):
            self.generation_started()
            if isinstance(frame, LLMContextFrame) and self._notices is not None:
                self._deliver(frame, self._notices())
        elif isinstance(frame, FunctionCallsStartedFrame):
            for call in frame.function_calls:
                self._issued.add(call.tool_call_id)
                if self._on_unknown_tool is not None:
                    self._on_unknown_tool(call.function_name, call.tool_call_id)
        await self.push_frame(frame, direction)

    def _deliver(self, frame: LLMContextFrame, notices: list[str]) -> None:
        # The downstream LLM's system instruction for this generation (and the runs after its tool results): a
        # developer note after the caller's words reaches Gemini, Anthropic and Bedrock as if the caller said it.
        if self._instruction is not None:
            self._instruction.set("\n".join(notices))
            return
        for notice in notices:
            frame.context.add_message({"role": "developer", "content": notice})
