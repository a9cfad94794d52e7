"""Decision rules (keep, stop, sample), read from YAML before any call runs so a verdict cannot be fitted afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from pipecat_harness.errors import InputError
from pipecat_harness.eval.summary import Comparison
from pipecat_harness.sim.strict_model import StrictModel
from pipecat_harness.validation import describe_validation_error, load_mapping_file

__all__ = ["BUNDLED_RULES", "DecisionRules", "KeepRule", "RuleCheck", "RuleVerdict", "RulesError", "SampleRule",
           "StopRule", "check_keep", "check_sample", "check_stop", "load_rules"]

BUNDLED_RULES = Path(__file__).resolve().parent / "rules.yaml"


class RulesError(InputError):
    """A rules file that cannot be used; the message names the file and the field."""


class KeepRule(StrictModel):
    """Minimum benefit that justifies keeping a control (every condition must hold)."""

    min_target_reduction: float = Field(default=1, ge=0)
    min_target_reduction_rate: float | None = Field(default=None, ge=0, le=1)
    max_pass_rate_drop: float = Field(default=0.0, ge=0, le=1)
    max: dict[str, float] = Field(default_factory=dict)


class StopRule(StrictModel):
    """Regression that stops the run early (any condition met stops it)."""

    pass_rate_drop: float | None = Field(default=None, ge=0, le=1)
    above: dict[str, float] = Field(default_factory=dict)


class SampleRule(StrictModel):
    """How many calls are enough: rounds go on until every condition holds (or the budget is spent).

    Parameters:
        interval_width: The 95 % interval of each arm's pass rate is at most this wide.
        min_calls: Calls per arm before the rule can be met.
    """

    interval_width: float | None = Field(default=None, gt=0, le=1)
    min_calls: int = Field(default=0, ge=0)


class ControlRules(StrictModel):
    """The rules of one control."""

    keep: KeepRule = Field(default_factory=KeepRule)
    stop: StopRule = Field(default_factory=StopRule)
    sample: SampleRule = Field(default_factory=SampleRule)


class DecisionRules(StrictModel):
    """All rules of a scenario set: a default and per-control entries."""

    default: ControlRules = Field(default_factory=ControlRules)
    controls: dict[str, ControlRules] = Field(default_factory=dict)
    source: str = Field(default="", exclude=True)

    def for_control(self, control: str) -> ControlRules:
        """The rules that apply to one control."""
        return self.controls.get(control, self.default)


@dataclass(frozen=True)
class RuleCheck:
    """One condition of a rule and whether it held."""

    condition: str
    met: bool
    detail: str


@dataclass
class RuleVerdict:
    """The verdict of a rule: met when all (keep) or any (stop) of its conditions were met."""

    met: bool
    checks: list[RuleCheck] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return {"met": self.met, "checks": [c.__dict__ for c in self.checks]}


def load_rules(path: str | Path | None = None) -> DecisionRules:
    """Load a rules file (the bundled rules when ``path`` is ``None``); a ``RulesError`` when it cannot be used."""
    path = Path(path) if path is not None else BUNDLED_RULES
    raw = load_mapping_file(path, what="rules file", error=RulesError)
    try:
        rules = DecisionRules.model_validate(raw)
    except ValidationError as exc:
        raise RulesError(f"{path}: {describe_validation_error(exc, model=DecisionRules)}") from exc
    return rules.model_copy(update={"source": str(path)})


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _at_most(value: float | None, limit: float) -> bool:
    return value is not None and value <= limit + 1e-9


def _above(value: float | None, limit: float) -> bool:
    return value is not None and value > limit + 1e-9


def _pass_rates(v: dict[str, float | None]) -> str:
    return f"on {_fmt(v['pass_rate_on'])}, off {_fmt(v['pass_rate_off'])}"


def check_keep(rules: DecisionRules, comparison: Comparison) -> RuleVerdict:
    """Whether the minimum benefit that justifies keeping the control was met."""
    rule, v = rules.for_control(comparison.control).keep, comparison.values
    reduced = (v["target_reduction"] or 0) >= rule.min_target_reduction
    target = f"{comparison.target}: off {_fmt(v['target_off'])}, on {_fmt(v['target_on'])}"
    checks = [RuleCheck(f"target reduction >= {rule.min_target_reduction:g}", reduced, target)]
    if (min_rate := rule.min_target_reduction_rate) is not None:
        met = (rate := v["target_reduction_rate"]) is not None and rate >= min_rate
        checks.append(RuleCheck(f"target reduction rate >= {min_rate:g}", met, f"reduction rate {_fmt(rate)}"))
    drop = rule.max_pass_rate_drop
    checks.append(RuleCheck(f"pass rate drop <= {drop:g}", _at_most(v["pass_rate_drop"], drop), _pass_rates(v)))
    for name, limit in rule.max.items():
        met, detail = (v[name] is None or _at_most(v[name], limit), f"{name} = {_fmt(v[name])}") if name in v else (
            False, f"unknown value {name!r}")
        checks.append(RuleCheck(f"{name} <= {limit:g}", met, detail))
    return RuleVerdict(all(c.met for c in checks), checks)


def check_stop(rules: DecisionRules, comparison: Comparison) -> RuleVerdict:
    """Whether a regression that stops the run early was reached."""
    rule, v = rules.for_control(comparison.control).stop, comparison.values
    checks = []
    if (drop := rule.pass_rate_drop) is not None:
        checks.append(RuleCheck(f"pass rate drop > {drop:g}", _above(v["pass_rate_drop"], drop), _pass_rates(v)))
    for name, limit in rule.above.items():
        checks.append(RuleCheck(f"{name} > {limit:g}", _above(v.get(name), limit), f"{name} = {_fmt(v.get(name))}"))
    return RuleVerdict(any(c.met for c in checks), checks)


def check_sample(rules: DecisionRules, comparison: Comparison) -> RuleVerdict:
    """Whether enough calls were run to decide (never met when the rule declares nothing)."""
    rule, on, off = rules.for_control(comparison.control).sample, comparison.on, comparison.off
    if rule.interval_width is None and not rule.min_calls:
        return RuleVerdict(False, [])
    enough = min(on.calls, off.calls) >= rule.min_calls
    checks = [RuleCheck(f"calls per arm >= {rule.min_calls}", enough, f"on {on.calls}, off {off.calls}")]
    if (max_width := rule.interval_width) is not None:
        for name, arm in (("on", on), ("off", off)):
            width = interval[1] - interval[0] if (interval := arm.pass_rate_interval) is not None else None
            detail = f"{arm.passed}/{arm.calls}, 95% interval width {_fmt(width)}"
            met = _at_most(width, max_width)
            checks.append(RuleCheck(f"{name} pass-rate interval width <= {max_width:g}", met, detail))
    return RuleVerdict(all(c.met for c in checks), checks)
