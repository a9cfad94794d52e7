"""Re-run the model at a decision point under treatments and tabulate its next action.

``none``: the recorded context; ``reminder``: the check's rule in words appended to the system instruction;
``feedback``: a tool call the check refuses gets the check's tool result and the model is asked again. Sample *i* uses
the same seed in every treatment.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pipecat.services.llm_service import LLMService

from pipecat_harness.replay.actions import NextAction, ReferenceAction, ToolCall
from pipecat_harness.replay.checks import ToolCheck
from pipecat_harness.replay.decision_point import DecisionPoint, ReplayError
from pipecat_harness.replay.model_session import ModelSession
from pipecat_harness.sim.model_script import ModelScript

__all__ = [
    "TREATMENTS",
    "ModelSource",
    "ReplayTable",
    "SampleResult",
    "ScriptedSource",
    "ServiceSource",
    "TreatmentResult",
    "replay_decision",
]

TREATMENTS = ("none", "reminder", "feedback")


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
    """A provider's Pipecat service, built per sample by ``build(system_instruction, sample)``.

    ``build`` may be a coroutine function (a service whose endpoint must start on the running loop first).
    """

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
        treatments = [
            {
                "treatment": r.treatment,
                "matched": r.matched if self.reference else None,
                "samples": len(r.samples),
                "changed_from_recorded": r.changed_from(recorded),
                "actions": r.actions(),
                "runs": [s.to_dict() for s in r.samples],
            }
            for r in self.results
        ]
        return {
            "trace": self.trace,
            "at": self.point.index,
            "t": self.point.t,
            "model": self.model,
            "model_settings": self.model_settings,
            "check": self.check,
            "reminder": self.reminder,
            "reference": self.reference.source if self.reference else None,
            "recorded": recorded.to_dict(),
            "treatments": treatments,
        }


def _feedback_messages(action: NextAction, results: list[tuple[ToolCall, Any]]) -> list[dict[str, Any]]:
    """The assistant's response and the check's tool results, as the context would hold them."""
    messages: list[dict[str, Any]] = []
    if action.text:
        messages.append({"role": "assistant", "content": action.text})
    calls = [ToolCall(c.name, c.arguments, c.tool_call_id or f"replay_{i}") for i, (c, _) in enumerate(results)]
    messages.append({"role": "assistant", "tool_calls": [c.to_message() for c in calls]})
    for call, (_, result) in zip(calls, results, strict=True):
        messages.append({"role": "tool", "tool_call_id": call.tool_call_id, "content": json.dumps(result, default=str)})
    return messages


@dataclass(frozen=True)
class _Replay:
    """One decision point, model and check, sampled under each treatment."""

    point: DecisionPoint
    source: ModelSource
    check: ToolCheck
    reference: ReferenceAction | None
    write_tools: frozenset[str]
    timeout_secs: float

    async def run(self, treatments: Sequence[str], samples: int) -> list[TreatmentResult]:
        results = []
        for treatment in treatments:
            results.append(TreatmentResult(treatment, [await self.sample(treatment, i) for i in range(samples)]))
        return results

    async def sample(self, treatment: str, sample: int) -> SampleResult:
        point = self.point
        llm = self.source.service(point.system, sample)
        if inspect.isawaitable(llm):
            llm = await llm
        if treatment == "reminder":
            llm.append_system_instruction(self.check.reminder)
        async with ModelSession(llm, point.tools, timeout_secs=self.timeout_secs) as session:
            first = await session.ask(point.messages)
            next_action, given = first, []
            if treatment == "feedback":
                results = await self.check.feedback(point, first, self.write_tools)
                if results is not None:
                    given = [result for _, result in results]
                    next_action = await session.ask(point.messages + _feedback_messages(first, results))
            requests = session.requests
        matched = self.reference.matches(next_action) if self.reference is not None else None
        return SampleResult(sample, first, given, next_action, matched, requests)


def replay_decision(
    point: DecisionPoint,
    source: ModelSource,
    *,
    treatments: Sequence[str] = TREATMENTS,
    samples: int = 3,
    check: ToolCheck,
    reference: ReferenceAction | None = None,
    write_tools: Iterable[str] = (),
    trace: str = "",
    timeout_secs: float = 60.0,
) -> ReplayTable:
    """Run every treatment ``samples`` times at ``point`` and return the table.

    ``check`` gives the treatments their feedback and reminder, its gate guarding ``write_tools``; ``reference`` is
    read by the scorer only; ``trace`` names the table; ``timeout_secs`` is the longest wait for one response. An
    unknown treatment, a bad sample count or a failed model request is a ``ReplayError``.
    """
    unknown = [t for t in treatments if t not in TREATMENTS]
    if unknown:
        raise ReplayError(f"--treatment {','.join(unknown)}: unknown; choose from {', '.join(TREATMENTS)}")
    if not 1 <= samples <= 1000:
        raise ReplayError(f"--samples {samples}: give a number from 1 to 1000")
    job = _Replay(point, source, check, reference, frozenset(write_tools), timeout_secs)
    coroutine = job.run(list(treatments), samples)
    if source.virtual_time:
        from pipecat_harness.sim.clock import virtual_time

        with virtual_time(max_virtual_secs=3600.0, max_wall_secs=600.0) as loop:
            with asyncio.Runner(loop_factory=lambda: loop) as runner:
                results = runner.run(coroutine)
    else:
        results = asyncio.run(coroutine)
    settings = dict(getattr(source, "settings", {}) or {})
    return ReplayTable(trace, point, source.label, check.name, check.reminder, reference, results, settings)
