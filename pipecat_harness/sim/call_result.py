"""What a simulated call produced: each expectation checked and the figures the evaluation reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipecat_harness.decisions import ControlDecision
from pipecat_harness.sim.history_metrics import TurnPlayback

__all__ = ["CallResult", "CheckResult", "ModelUsage"]


@dataclass(frozen=True)
class ModelUsage:
    """What the call cost at the model: requests (responses started) and tokens summed over them.

    ``reported`` counts the requests whose usage the provider reported (some servers never send usage in a stream);
    ``streamed_chars`` is the text streamed, for an estimate when it is not.
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

    ``passed`` says every expectation in ``checks`` held (the business outcome matched); ``expected`` is the outcome the
    scenario states for the ``active_controls``. ``playback`` scores each assistant turn's generated, heard and retained
    words; ``caller_requests`` counts a goal caller's requests to its caller model (cached lines excluded).
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
