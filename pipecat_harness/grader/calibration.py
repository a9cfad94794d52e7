"""Score a grader against a labeled set: precision and recall of flags per category.

A labeled set is YAML or JSON::

    constraints: detailing.yaml          # relative to the labeled file
    tenants: {retail: retail.yaml}       # optional: more tenants, named by items
    items:
      - {category: action, grounded: true, text: "I've updated your address.", operations: [modify_order_address]}
      - {category: capability, grounded: true, tenant: retail, text: "Let me pull up your order."}

An ungrounded item is a positive the grader should flag; a grounded item that gets flagged is a false flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipecat_harness.grader.actions import InMemoryOperations, OperationLedgerView
from pipecat_harness.grader.constraints import ConstraintError, ConstraintList
from pipecat_harness.grader.verdict import CATEGORIES, Grader, Verdict
from pipecat_harness.validation import load_mapping_file

__all__ = ["LABELED_SET_PATH", "CalibrationReport", "CategoryScore", "LabeledItem", "LabeledSet", "evaluate", "share"]

#: The labeled set shipped with the package.
LABELED_SET_PATH = Path(__file__).resolve().parent / "data" / "labeled_detailing.yaml"


class LabeledItem(BaseModel):
    """One labeled agent utterance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    category: Literal["price", "hours", "policy", "capability", "action", "none"]
    grounded: bool
    caller: str | None = None
    operations: tuple[str, ...] = ()
    tenant: str | None = None


@dataclass
class LabeledSet:
    """Labeled items, the default tenant's constraint list, and other ``tenants``' lists by the name items give."""

    constraints: ConstraintList
    items: list[LabeledItem]
    tenants: dict[str, ConstraintList] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> LabeledSet:
        """Load a labeled set file; ``ConstraintError`` when it, its constraint list or an item is invalid."""
        path = Path(path)
        raw = load_mapping_file(path, what="labeled set", error=ConstraintError)
        if "constraints" not in raw or not isinstance(raw.get("items"), list):
            raise ConstraintError(f"{path}: a labeled set needs 'constraints' (a path) and 'items' (a list)")
        constraints = ConstraintList.load(path.parent / str(raw["constraints"]))
        named = raw.get("tenants") or {}
        if not isinstance(named, dict):
            raise ConstraintError(f"{path}: 'tenants' must map tenant names to constraint list paths")
        tenants = {str(name): ConstraintList.load(path.parent / str(file)) for name, file in named.items()}
        items = []
        for index, item in enumerate(raw["items"]):
            try:
                items.append(LabeledItem.model_validate(item))
            except ValidationError as exc:
                raise ConstraintError(f"{path}: item {index}: {exc.errors()[0]['msg']} ({item!r})") from exc
            if items[-1].tenant is not None and items[-1].tenant not in tenants:
                known = ", ".join(sorted(tenants)) or "none"
                raise ConstraintError(f"{path}: item {index}: unknown tenant {items[-1].tenant!r} (tenants: {known})")
        return cls(constraints, items, tenants)


def share(part: float, rest: float) -> float | None:
    """``part / (part + rest)``, or ``None`` when both are zero."""
    return part / (part + rest) if part + rest else None


@dataclass
class CategoryScore:
    """Flag counts for one category (weighted, so floats, when estimated from a sample)."""

    tp: float = 0
    fp: float = 0
    fn: float = 0
    tn: float = 0

    @property
    def precision(self) -> float:
        """Flagged items that were really ungrounded (1.0 when nothing was flagged)."""
        return 1.0 if (found := share(self.tp, self.fp)) is None else found

    @property
    def recall(self) -> float:
        """Ungrounded items that were flagged (1.0 when there were none)."""
        return 1.0 if (found := share(self.tp, self.fn)) is None else found

    @property
    def false_flag_rate(self) -> float:
        """Grounded items that were flagged."""
        return share(self.fp, self.tn) or 0.0

    def add(self, grounded: bool, flagged: bool, weight: float = 1) -> None:
        """Count one item (``weight``: how many items it stands for)."""
        if grounded:
            self.fp += flagged * weight
            self.tn += (not flagged) * weight
        else:
            self.tp += flagged * weight
            self.fn += (not flagged) * weight


@dataclass
class CalibrationReport:
    """Scores per category and overall, with the misjudged items."""

    grader: str
    scores: dict[str, CategoryScore] = field(default_factory=dict)
    total: CategoryScore = field(default_factory=CategoryScore)
    misses: list[tuple[LabeledItem, list[Verdict]]] = field(default_factory=list)

    def table(self) -> str:
        """The report as a plain-text table."""
        lines = [f"grader: {self.grader}",
                 f"{'category':<12}{'items':>6}{'precision':>11}{'recall':>8}{'false flags':>13}"]
        for name, score in [*self.scores.items(), ("all", self.total)]:
            count = score.tp + score.fp + score.fn + score.tn
            lines.append(
                f"{name:<12}{count:>6}{score.precision:>11.1%}{score.recall:>8.1%}{score.false_flag_rate:>13.1%}")
        return "\n".join(lines)


async def evaluate(make_grader: Callable[[ConstraintList, OperationLedgerView], Grader],
                   labeled: LabeledSet) -> CalibrationReport:
    """Grade every labeled item (its ``operations`` in a ledger under a call of its own) and count flags."""
    ledger = InMemoryOperations()
    for index, item in enumerate(labeled.items):
        for tool in item.operations:
            ledger.record(f"item-{index}", tool)
    graders: dict[str | None, Grader] = {None: make_grader(labeled.constraints, ledger)}
    graders |= {name: make_grader(constraints, ledger) for name, constraints in labeled.tenants.items()}
    report = CalibrationReport(graders[None].model, {c: CategoryScore() for c in (*CATEGORIES, "none")})
    for index, item in enumerate(labeled.items):
        verdicts = list(await graders[item.tenant].grade(item.text, item.caller, call_id=f"item-{index}"))
        flagged = any(v.flagged for v in verdicts)
        report.scores[item.category].add(item.grounded, flagged)
        report.total.add(item.grounded, flagged)
        if flagged == item.grounded:
            report.misses.append((item, verdicts))
    return report
