"""The README's "Add the harness to an existing Pipecat bot", run with stand-in services and Pipecat alone.

Run by ``.ci/wheel-smoke`` with the Python of a virtualenv holding the wheel and no extras. One caller turn asks
for a refund; the stand-in model requests the refund twice in one reply, then answers. The call must end with the
refund executed once (the tool gate suppressed the repeat), the decision on the call's timeline, and no module of
an extra imported. Exits non-zero, with the reason, otherwise.
"""

import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from loguru import logger
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallFromLLM, FunctionCallParams, LLMService
from pipecat.services.settings import LLMSettings
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.utils.time import time_now_iso8601
from pipecat.workers.runner import WorkerRunner

from pipecat_harness import Harness, HarnessConfig

EXTRA_MODULES = ("time_machine", "rich", "sqlalchemy", "aiosqlite")


class PassThrough(FrameProcessor):
    """Stands in for ``transport.input()``, the STT service and the TTS service."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Pass every frame on."""
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)


class Output(BaseOutputTransport):
    """Stands in for ``transport.output()``: a transport that is ready once started and writes nowhere."""

    def __init__(self) -> None:
        super().__init__(TransportParams())

    async def start(self, frame: StartFrame) -> None:
        """Start, and be ready at once."""
        await super().start(frame)
        await self.set_transport_ready(frame)


class StandInLLM(LLMService):
    """Requests ``issue_refund`` twice in its first reply, then says it is done."""

    def __init__(self) -> None:
        super().__init__(settings=LLMSettings(**{f.name: None for f in dataclasses.fields(LLMSettings) if f.init}))
        self.answered = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Answer each context frame."""
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        await self.push_frame(LLMFullResponseStartFrame())
        if not any(m.get("role") == "tool" for m in frame.context.get_messages() if isinstance(m, dict)):
            calls = [FunctionCallFromLLM(function_name="issue_refund", tool_call_id=f"call_{n}",
                                         arguments={"order_id": "W1234567"}, context=frame.context)
                     for n in (1, 2)]
            await self.run_function_calls(calls)
        else:
            await self.push_frame(LLMTextFrame("Your refund is on its way."))
            self.answered.set()
        await self.push_frame(LLMFullResponseEndFrame())


async def main() -> int:
    """Run one call; return the exit status."""
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    refunds: list[dict] = []

    async def issue_refund(params: FunctionCallParams) -> None:
        refunds.append(dict(params.arguments))
        await params.result_callback({"status": "refunded"})

    traces = Path(tempfile.mkdtemp())
    config = HarnessConfig.preset("retail").model_copy(deep=True)
    config.trace.directory = str(traces)
    # This stand-in model never reads the refund back; confirmation before writes has its own simulated calls.
    config.call_state.confirm_writes = False
    transport_input, stt, tts = PassThrough(), PassThrough(), PassThrough()
    llm, output = StandInLLM(), Output()
    context = LLMContext()

    harness = Harness(config, call_id="readme")
    user_agg, assistant_agg = LLMContextAggregatorPair(
        context, user_params=harness.user_params(LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(stop=[SpeechTimeoutUserTurnStopStrategy()])))
    )
    harness.register_function(llm, "issue_refund", issue_refund, write=True)
    pipeline = Pipeline(harness.place([transport_input, stt, user_agg, llm, tts, output, assistant_agg]))
    worker = PipelineWorker(pipeline, observers=harness.observers())

    async def caller() -> None:
        await asyncio.sleep(0.2)
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        said = "I would like a refund for order W1234567, please."
        await worker.queue_frame(TranscriptionFrame(said, "caller", time_now_iso8601()))
        await worker.queue_frame(VADUserStoppedSpeakingFrame())
        await asyncio.wait_for(llm.answered.wait(), 20)
        await asyncio.sleep(0.2)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.wait_for(asyncio.gather(runner.run(), caller()), 30)
    harness.close()

    problems = []
    if refunds != [{"order_id": "W1234567"}]:
        problems.append(f"issue_refund ran {len(refunds)} times, expected once")
    messages = [m for m in context.get_messages() if isinstance(m, dict)]
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    if answered != {"call_1", "call_2"}:
        problems.append(f"tool calls with a result in the context: {sorted(answered)}, expected call_1 and call_2")
    trace_file = traces / "readme.jsonl"
    records = [json.loads(line) for line in trace_file.read_text().splitlines()] if trace_file.exists() else []
    if not any("tool_gate" in json.dumps(r) for r in records):
        problems.append(f"no tool_gate decision on the timeline {trace_file}")
    loaded = sorted(m for m in EXTRA_MODULES if m in sys.modules)
    if loaded:
        problems.append(f"the core imported modules of extras: {', '.join(loaded)}")
    for problem in problems:
        print(f"README pipeline: {problem}", file=sys.stderr)
    if not problems:
        print(f"README pipeline: refund executed once, {len(records)} timeline records, controls "
              f"{', '.join(sorted(harness.active_controls))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
