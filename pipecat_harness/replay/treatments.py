"""Re-run the model at a decision point under treatments and tabulate its next action (nothing executes).

``none``: the recorded context; ``reminder``: the check's rule appended to the system instruction; ``feedback``: a
refused tool call gets the check's result and the model is asked again. Sample *i* has one seed in all treatments.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames import frames
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams, LLMService
from pipecat.workers.runner import WorkerRunner

from pipecat_harness.replay.actions import NextAction, ReferenceAction, ToolCall
from pipecat_harness.replay.checks import ToolCheck
from pipecat_harness.replay.decision_point import DecisionPoint, ReplayError
from pipecat_harness.sim.model_script import ModelScript

__all__ = ["TREATMENTS", "ModelSession", "ModelSource", "ReplayTable", "SampleResult", "ScriptedSource",
           "ServiceSource", "TreatmentResult", "replay_decision", "tools_schema"]

TREATMENTS = ("none", "reminder", "feedback")


def tools_schema(tools: list[dict[str, Any]]) -> ToolsSchema | None:
    """Pipecat's ``ToolsSchema`` for recorded function schemas (``None`` when there are none)."""
    functions = [FunctionSchema(str(t["name"]), str(t.get("description") or ""), dict(p.get("properties") or {}),
                                list(p.get("required") or [])) for t in tools for p in [t.get("parameters") or {}]]
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

    async def process_frame(self, frame: frames.Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, frames.LLMFullResponseStartFrame):
            self.text = []
        elif isinstance(frame, frames.LLMTextFrame):
            self.text.append(frame.text)
        elif isinstance(frame, frames.FunctionCallsStartedFrame):
            calls = frame.function_calls
            self.calls += [ToolCall(c.function_name, dict(c.arguments or {}), c.tool_call_id) for c in calls]
        elif isinstance(frame, frames.ErrorFrame):
            self.error = str(frame.error)
        if isinstance(frame, (frames.ErrorFrame, frames.LLMFullResponseEndFrame)):
            self.done.set()
        await self.push_frame(frame, direction)


async def _hold_call(params: FunctionCallParams) -> None:
    # Nothing executes in a replay, and no new inference follows on its own.
    await params.result_callback(None, properties=frames.FunctionCallResultProperties(run_llm=False))


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
        await self._worker.queue_frame(frames.LLMContextFrame(context=context))
        try:
            await asyncio.wait_for(self._collector.done.wait(), self.timeout_secs)
        except TimeoutError:
            raise ReplayError(f"the model gave no complete response within {self.timeout_secs:g} s") from None
        if self._collector.error is not None:
            raise ReplayError(f"the model request failed: {self._collector.error}")
        # Tool calls are announced right before the response ends; let the collector see them.
        await asyncio.sleep(0)
        return NextAction("".join(self._collector.text).strip(), tuple(self._collector.calls))


class ModelSource(Protocol):
    """Builds the model's LLM service for one sample."""

    label: str
    #: Whether the service may run on the simulator's virtual time (no real network).
    virtual_time: bool

    def service(self, system_instruction: str | None, sample: int) -> Any:
        """A fresh service for sample ``sample`` with the given system instruction (or an awaitable of one)."""
        ...


@dataclass
class ScriptedSource:
    """The scripted model of the scenario the call was simulated from; sample *i* samples with ``"{seed}:{i}"``."""

    script: ModelScript
    seed: int = 0
    label: str = "scripted"
    virtual_time: bool = True

    def service(self, system_instruction: str | None, sample: int) -> LLMService[Any]:
        """A scripted service sampling with this sample's seed."""
        from pipecat_harness.sim.scripted_llm import ScriptedLLMService

        system = system_instruction if system_instruction is not None else self.script.system
        return ScriptedLLMService(self.script, system_instruction=system, seed=f"{self.seed}:{sample}")


@dataclass
class ServiceSource:
    """A provider's Pipecat service per sample, from ``build(system_instruction, sample)`` (which may be async)."""

    label: str
    build: Callable[[str | None, int], Any]
    virtual_time: bool = False
    settings: dict[str, Any] = field(default_factory=dict)

    def service(self, system_instruction: str | None, sample: int) -> Any:
        """The service for one sample."""
        return self.build(system_instruction, sample)


@dataclass(frozen=True)
class SampleResult:
    """One sample of one treatment: the model's ``first`` response and the ``next_action`` the treatment ends with.

    Parameters:
        feedback: The tool results the check returned (empty when it refused nothing or was not asked); the model's
            answer to them is the next action.
        matched: Whether the next action is the reference action (``None``: no reference given).
    """

    sample: int
    first: NextAction
    feedback: list[Any]
    next_action: NextAction
    matched: bool | None
    requests: int

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {**asdict(self), "first": self.first.to_dict(), "next_action": self.next_action.to_dict()}


@dataclass
class TreatmentResult:
    """Every sample of one treatment."""

    treatment: str
    samples: list[SampleResult] = field(default_factory=list)

    @property
    def matched(self) -> int:
        """Samples whose next action is the reference action."""
        return sum(1 for s in self.samples if s.matched)

    def changed_from(self, recorded: NextAction) -> int:
        """Samples whose next action differs from the recorded one (by label)."""
        return sum(1 for s in self.samples if s.next_action.label() != recorded.label())

    def actions(self) -> list[tuple[str, int]]:
        """Next actions by label, most frequent first."""
        return Counter(s.next_action.label() for s in self.samples).most_common()


@dataclass
class ReplayTable:
    """The result of a replay: the decision point, the settings, and every treatment's samples."""

    trace: str
    point: DecisionPoint
    model: str
    check: str
    reminder: str
    reference: ReferenceAction | None
    results: list[TreatmentResult]
    model_settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping (what ``replay --json`` writes)."""
        recorded = self.point.recorded
        treatments = [{"treatment": r.treatment, "matched": r.matched if self.reference else None,
                       "samples": len(r.samples), "changed_from_recorded": r.changed_from(recorded),
                       "actions": r.actions(), "runs": [s.to_dict() for s in r.samples]} for r in self.results]
        return {"trace": self.trace, "at": self.point.index, "t": self.point.t, "model": self.model,
                "model_settings": self.model_settings, "check": self.check, "reminder": self.reminder,
                "reference": self.reference.source if self.reference else None, "recorded": recorded.to_dict(),
                "treatments": treatments}


def _feedback_messages(action: NextAction, results: list[tuple[ToolCall, Any]]) -> list[dict[str, Any]]:
    """The assistant's response and the check's tool results, as the context would hold them."""
    said = [{"role": "assistant", "content": action.text}] if action.text else []
    calls = [ToolCall(c.name, c.arguments, c.tool_call_id or f"replay_{i}") for i, (c, _) in enumerate(results)]
    answers = [{"role": "tool", "tool_call_id": call.tool_call_id, "content": json.dumps(result, default=str)}
               for call, (_, result) in zip(calls, results, strict=True)]
    return [*said, {"role": "assistant", "tool_calls": [c.to_message() for c in calls]}, *answers]


def replay_decision(point: DecisionPoint, source: ModelSource, *, treatments: Sequence[str] = TREATMENTS,
                    samples: int = 3, check: ToolCheck, reference: ReferenceAction | None = None,
                    write_tools: Iterable[str] = (), trace: str = "", timeout_secs: float = 60.0) -> ReplayTable:
    """Run every treatment ``samples`` times at ``point`` and return the table.

    ``check`` gives the feedback and reminder, its gate guarding ``write_tools``; ``reference`` is for the scorer only;
    ``timeout_secs`` bounds one response. A bad treatment, sample count or model request is a ``ReplayError``.
    """
    if unknown := [t for t in treatments if t not in TREATMENTS]:
        raise ReplayError(f"--treatment {','.join(unknown)}: unknown; choose from {', '.join(TREATMENTS)}")
    if not 1 <= samples <= 1000:
        raise ReplayError(f"--samples {samples}: give a number from 1 to 1000")
    write_tools = frozenset(write_tools)

    async def sample(treatment: str, index: int) -> SampleResult:
        llm = source.service(point.system, index)
        if inspect.isawaitable(llm):
            llm = await llm
        if treatment == "reminder":
            llm.append_system_instruction(check.reminder)
        async with ModelSession(llm, point.tools, timeout_secs=timeout_secs) as session:
            first = await session.ask(point.messages)
            next_action, given = first, []
            if treatment == "feedback":
                results = await check.feedback(point, first, write_tools)
                if results is not None:
                    given = [result for _, result in results]
                    next_action = await session.ask(point.messages + _feedback_messages(first, results))
            requests = session.requests
        matched = reference.matches(next_action) if reference is not None else None
        return SampleResult(index, first, given, next_action, matched, requests)

    async def every_sample() -> list[TreatmentResult]:
        return [TreatmentResult(t, [await sample(t, i) for i in range(samples)]) for t in treatments]

    if source.virtual_time:
        from pipecat_harness.sim.clock import virtual_time

        with virtual_time(max_virtual_secs=3600.0, max_wall_secs=600.0) as loop:
            with asyncio.Runner(loop_factory=lambda: loop) as runner:
                results = runner.run(every_sample())
    else:
        results = asyncio.run(every_sample())
    settings = dict(getattr(source, "settings", {}) or {})
    return ReplayTable(trace, point, source.label, check.name, check.reminder, reference, results, settings)
