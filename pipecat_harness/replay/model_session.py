"""Ask a Pipecat LLM service for its next action on a given context, without executing anything."""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    FunctionCallResultProperties,
    FunctionCallsStartedFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams, LLMService
from pipecat.workers.runner import WorkerRunner

from pipecat_harness.replay.actions import NextAction, ToolCall
from pipecat_harness.replay.decision_point import ReplayError

__all__ = ["ModelSession", "tools_schema"]


def tools_schema(tools: list[dict[str, Any]]) -> ToolsSchema | None:
    """Pipecat's ``ToolsSchema`` for recorded function schemas (``None`` when there are none)."""
    functions = []
    for tool in tools:
        parameters = tool.get("parameters") or {}
        properties, required = dict(parameters.get("properties") or {}), list(parameters.get("required") or [])
        description = str(tool.get("description") or "")
        functions.append(FunctionSchema(str(tool["name"]), description, properties, required))
    return ToolsSchema(standard_tools=functions) if functions else None


class _Collector(FrameProcessor):
    """Records the text and tool calls of the service's response."""

    def __init__(self) -> None:
        super().__init__()
        self.done = asyncio.Event()
        self.reset()

    def reset(self) -> None:
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.error: str | None = None
        self.done.clear()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMFullResponseStartFrame):
            self.text = []
        elif isinstance(frame, LLMTextFrame):
            self.text.append(frame.text)
        elif isinstance(frame, FunctionCallsStartedFrame):
            self.calls += [
                ToolCall(c.function_name, dict(c.arguments or {}), c.tool_call_id) for c in frame.function_calls
            ]
        elif isinstance(frame, ErrorFrame):
            self.error = str(frame.error)
            self.done.set()
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.done.set()
        await self.push_frame(frame, direction)


async def _hold_call(params: FunctionCallParams) -> None:
    # Nothing executes in a replay, and no new inference follows on its own.
    await params.result_callback(None, properties=FunctionCallResultProperties(run_llm=False))


class ModelSession:
    """One LLM service (scripted, or a provider's class) answering context after context, offered the recorded tools."""

    def __init__(self, llm: LLMService[Any], tools: list[dict[str, Any]], *, timeout_secs: float = 60.0) -> None:
        self.llm = llm
        self.tools = tools_schema(tools)
        self.timeout_secs = timeout_secs
        self.requests = 0
        self._collector = _Collector()
        self._worker: PipelineWorker | None = None
        self._task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> ModelSession:
        self.llm.register_function(None, _hold_call)
        pipeline = Pipeline([self.llm, self._collector])
        self._worker = PipelineWorker(pipeline, params=PipelineParams(), enable_rtvi=False, idle_timeout_secs=None)
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(self._worker)
        self._task = asyncio.ensure_future(runner.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._worker is not None:
            await self._worker.cancel(reason="replay done")
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 10.0)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()

    async def ask(self, messages: list[dict[str, Any]]) -> NextAction:
        """The service's response to ``messages``; a ``ReplayError`` when it fails or does not finish in time."""
        if self._worker is None:
            raise RuntimeError("use 'async with ModelSession(...)' before asking")
        self._collector.reset()
        copies: list[Any] = [dict(m) for m in messages]
        context = LLMContext(messages=copies, tools=self.tools) if self.tools else LLMContext(messages=copies)
        self.requests += 1
        await self._worker.queue_frame(LLMContextFrame(context=context))
        try:
            await asyncio.wait_for(self._collector.done.wait(), self.timeout_secs)
        except TimeoutError:
            raise ReplayError(f"the model gave no complete response within {self.timeout_secs:g} s") from None
        if self._collector.error is not None:
            raise ReplayError(f"the model request failed: {self._collector.error}")
        # Tool calls are announced right before the response ends; let the collector see them.
        await asyncio.sleep(0)
        return NextAction("".join(self._collector.text).strip(), tuple(self._collector.calls))
