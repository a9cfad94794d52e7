"""What a simulated call produced: each expectation checked and the figures the evaluation reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipecat_harness.decisions import ControlDecision
from pipecat_harness.sim.history_metrics import TurnPlayback

__all__ = ["CallResult", "CheckResult", "ModelUsage"]


@dataclass(frozen=True)
class ModelUsage:
    """What the call cost at the model, from the provider's usage metadata.

    Parameters:
        requests: Model requests (responses started).
        prompt_tokens: Input tokens, summed over the requests.
        completion_tokens: Output tokens, summed.
        total_tokens: Total tokens as the provider reports them.
        reported: Requests whose usage the provider reported (some servers never send usage in a stream).
        streamed_chars: Characters of text the model streamed (for an estimate when usage is not reported).
    """

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reported: int = 0
    streamed_chars: int = 0


@dataclass(frozen=True)
class CheckResult:
    """One expectation of a scenario and whether it held."""

    name: str
    ok: bool
    detail: str


@dataclass
class CallResult:
    """The outcome of one simulated call.

    Parameters:
        passed: Whether every expectation held (the business outcome matched).
        expected: The outcome expected with the active controls (``pass``/``fail``).
        checks: Each expectation and whether it held.
        active_controls: Controls the harness built for the call.
        decisions: Every control decision taken.
        playback: Per assistant turn: generated, heard and retained words.
        trace_path: Where the timeline was written, if anywhere.
        virtual_secs: Length of the call in simulated time.
        wall_secs: Wall-clock time the simulation took.
        caller_completed: Whether the caller got through the whole script.
        model_replies: The text of every model reply, in order.
        tool_executions: Business handler executions by tool.
        write_tools: The tools that change business state.
        model_usage: Requests and tokens at the model.
        caller_requests: Requests a goal caller made to its caller model (cached lines excluded).
    """

    scenario: str
    passed: bool
    expected: str
    checks: list[CheckResult]
    active_controls: frozenset[str]
    decisions: list[ControlDecision]
    playback: list[TurnPlayback]
    trace_path: Path | None
    virtual_secs: float
    wall_secs: float
    caller_completed: bool
    model_replies: list[str] = field(default_factory=list)
    tool_executions: dict[str, int] = field(default_factory=dict)
    write_tools: frozenset[str] = frozenset()
    model_usage: ModelUsage = field(default_factory=ModelUsage)
    caller_requests: int = 0

    @property
    def outcome(self) -> str:
        """``pass`` or ``fail``."""
        return "pass" if self.passed else "fail"

    @property
    def as_expected(self) -> bool:
        """Whether the outcome is the one the scenario states for the active controls."""
        return self.outcome == self.expected
