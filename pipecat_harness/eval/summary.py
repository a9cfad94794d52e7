"""Aggregate per-call metrics into per-arm figures and one comparison per toggled control.

Every figure is a :class:`Figure`: a count, the denominator it is a rate of, and the calls behind it (those with an
opportunity for the error, e.g. an identifier pause or a write). :data:`CONTROL_TARGETS` names the targets and costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pipecat_harness.eval.intervals import wilson_interval
from pipecat_harness.eval.metrics import CallMetrics

__all__ = ["CONTROL_TARGETS", "ArmSummary", "Comparison", "Figure", "compare_arms", "summarize_arm"]


@dataclass(frozen=True)
class Figure:
    """A ``count`` over a denominator ``of`` (opportunities, counted in ``unit``), from ``calls`` calls that had one."""

    count: float
    of: float
    calls: int
    unit: str

    @property
    def rate(self) -> float | None:
        """``count / of``, or ``None`` when there was no opportunity."""
        return self.count / self.of if self.of else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """95 % Wilson interval of the rate (``None`` without opportunities or for totals)."""
        return wilson_interval(self.count, self.of)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        figure = {"count": self.count, "of": self.of, "calls": self.calls, "unit": self.unit, "rate": self.rate}
        return {**figure, "interval_95": list(self.interval) if self.interval else None}


_Measure = Callable[[CallMetrics], float]
_WRITES, _INTERRUPTED = attrgetter("tools.write_requests"), attrgetter("history.interrupted_turns")
#: Figure name -> (count, denominator, unit), measured over the calls of one arm.
_FIGURES: dict[str, tuple[_Measure, _Measure, str]] = {
    "failed_calls": (lambda c: int(not c.passed), lambda c: 1, "calls"),
    "identifiers_submitted_early": (lambda c: c.input.submitted_early, lambda c: c.input.identifier_pauses, "pauses"),
    "needless_delays": (lambda c: c.input.needless_holds, lambda c: c.input.user_turns, "user turns"),
    "added_wait_ms": (lambda c: c.input.added_wait_ms, lambda c: 1, "calls"),
    "duplicate_writes_executed": (lambda c: c.tools.duplicate_writes_executed, _WRITES, "writes"),
    "duplicates_prevented": (lambda c: c.tools.duplicates_prevented, _WRITES, "writes"),
    "disallowed_prevented": (lambda c: c.tools.disallowed_prevented, _WRITES, "writes"),
    "held_until_settled": (lambda c: c.tools.held_until_settled, _WRITES, "writes"),
    "false_blocks": (lambda c: c.tools.false_blocks, _WRITES, "writes"),
    "lookups": (lambda c: c.tools.lookups, lambda c: 1, "calls"),
    "follow_up_questions": (lambda c: c.tools.follow_up_questions, lambda c: 1, "calls"),
    "unplayed_text_retained": (lambda c: c.history.unplayed_retained_turns, _INTERRUPTED, "interrupted turns"),
    "unplayed_words_retained": (lambda c: c.history.unplayed_retained_words, _INTERRUPTED, "interrupted turns"),
    "played_text_removed": (lambda c: c.history.played_removed_turns, _INTERRUPTED, "interrupted turns"),
    "played_words_removed": (lambda c: c.history.played_removed_words, _INTERRUPTED, "interrupted turns"),
    "repeated_replies": (lambda c: c.history.repeated_replies, lambda c: c.history.assistant_turns, "replies"),
}
#: Decisions that change nothing (forwarding a tool call unchanged is not acting).
_PASSIVE = {"forwarded", "reconciled", "released", "played_in_full", "not_reasked"}


@dataclass
class ArmSummary:
    """The figures of one arm (all calls with the control on, or all with it off).

    Parameters:
        errors: Calls whose simulation itself failed.
        out_of_the_way: ``Figure`` of stay-out-of-the-way calls in which ``control`` took a decision.
    """

    calls: int
    passed: int
    errors: int
    figures: dict[str, Figure]
    out_of_the_way: Figure | None = None

    @property
    def pass_rate(self) -> float | None:
        """Share of calls whose business outcome passed."""
        return self.passed / self.calls if self.calls else None

    @property
    def pass_rate_interval(self) -> tuple[float, float] | None:
        """95 % Wilson interval of the pass rate."""
        return wilson_interval(self.passed, self.calls)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {"calls": self.calls, "passed": self.passed, "errors": self.errors, "pass_rate": self.pass_rate,
                "pass_rate_interval_95": list(self.pass_rate_interval) if self.pass_rate_interval else None,
                "figures": {k: v.to_dict() for k, v in self.figures.items()},
                "out_of_the_way": self.out_of_the_way.to_dict() if self.out_of_the_way else None}


def summarize_arm(calls: Iterable[CallMetrics], control: str | None = None) -> ArmSummary:
    """Aggregate the calls of one arm; ``control`` names the control whose stray actions are counted."""
    calls = list(calls)
    figures = {name: Figure(sum(count(c) for c in behind), sum(of(c) for c in behind), len(behind), unit)
               for name, (count, of, unit) in _FIGURES.items() for behind in [[c for c in calls if of(c) > 0]]}
    out_of_the_way = None
    if control is not None:
        quiet = [c for c in calls if c.stay_out_of_the_way]
        out_of_the_way = Figure(sum(_acted(c, control) for c in quiet), len(quiet), len(quiet),
                                "stay-out-of-the-way calls")
    return ArmSummary(len(calls), sum(c.passed for c in calls), sum(bool(c.error) for c in calls), figures,
                      out_of_the_way)


def _acted(call: CallMetrics, control: str) -> bool:
    """Whether a control changed something in the call."""
    splits = ((key.split("/", 1), n) for key, n in call.decisions.items())
    return any(n and control in ("all", owner) and action not in _PASSIVE for (owner, action), n in splits)


#: Control -> (target figure, cost figures). Costs marked ``extra_`` are on-arm minus off-arm totals.
CONTROL_TARGETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "identifier_hold": ("identifiers_submitted_early", ("needless_delays", "extra_added_wait_ms")),
    "spelling": ("failed_calls", ("extra_added_wait_ms",)),
    "silent_reply": ("failed_calls", ("extra_added_wait_ms", "extra_follow_up_questions")),
    "tool_gate": ("duplicate_writes_executed", ("false_blocks", "extra_lookups", "extra_follow_up_questions")),
    "history": ("unplayed_text_retained", ("played_text_removed", "played_words_removed", "repeated_replies")),
    "checklist": ("failed_calls", ("follow_up_questions",)),
    "grader": ("failed_calls", ()),
    "all": ("failed_calls", ("needless_delays", "extra_added_wait_ms", "false_blocks", "played_text_removed",
                             "repeated_replies", "extra_lookups", "extra_follow_up_questions")),
}


@dataclass
class Comparison:
    """One toggled control (or ``all``): both arms, target and cost names, the rules' values, variants ``runs_done``."""

    control: str
    on: ArmSummary
    off: ArmSummary
    target: str
    costs: tuple[str, ...]
    runs_done: int = 0
    values: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {"control": self.control, "target": self.target, "costs": list(self.costs), "runs_done": self.runs_done,
                "on": self.on.to_dict(), "off": self.off.to_dict(), "values": self.values}


def compare_arms(control: str, on_calls: list[CallMetrics], off_calls: list[CallMetrics], runs_done: int) -> Comparison:
    """Summarise both arms and compute the values the decision rules read.

    Values: ``target_on``/``off`` (counts), ``target_rate_on``/``off``, ``target_reduction`` (off minus on) and
    ``target_reduction_rate`` (of off), ``pass_rate_on``/``off`` and ``pass_rate_drop`` (off minus on), ``<name>_rate``
    per figure, ``[extra_]<name>_per_call`` for totals, ``out_of_the_way_rate``.
    """
    target, costs = CONTROL_TARGETS.get(control, ("failed_calls", ()))
    on, off = summarize_arm(on_calls, control), summarize_arm(off_calls, control)
    t_on, t_off = on.figures[target], off.figures[target]
    drop = off.pass_rate - on.pass_rate if on.pass_rate is not None and off.pass_rate is not None else None
    values: dict[str, float | None] = {
        "target_on": t_on.count, "target_off": t_off.count, "target_rate_on": t_on.rate, "target_rate_off": t_off.rate,
        "target_reduction": t_off.count - t_on.count,
        "target_reduction_rate": (t_off.count - t_on.count) / t_off.count if t_off.count else None,
        "pass_rate_on": on.pass_rate, "pass_rate_off": off.pass_rate, "pass_rate_drop": drop,
        "out_of_the_way_rate": on.out_of_the_way.rate if on.out_of_the_way is not None else None}
    values.update({f"{name}_rate": on.figures[name].rate for name in _FIGURES})
    calls = max(on.calls, 1)
    for name in ("lookups", "follow_up_questions", "added_wait_ms"):
        values[f"{name}_per_call"] = on.figures[name].count / calls
        values[f"extra_{name}_per_call"] = (on.figures[name].count - off.figures[name].count) / calls
    return Comparison(control, on, off, target, costs, runs_done, values)
