"""Calibration from production: operators' reviews of audited turns are the labels that check the grader.

``acknowledge`` says the verdict was right, ``override`` that it was not, ``escalate`` that the claim is a real problem.
Rows are sampled per tenant, ISO week and stratum (flagged or not), a reviewed row weighted by the rows it stands for.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from sqlalchemy import and_, select

from pipecat_harness.grader.audit import AuditStore, within_days
from pipecat_harness.grader.audit_row import AuditRow, ReviewEvent
from pipecat_harness.grader.calibration import CategoryScore, share

__all__ = ["AuditCalibration", "Bin", "WeekScore", "calibrate", "label"]

_BINS = ((0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0001))


def label(row: AuditRow, review: ReviewEvent) -> bool:
    """Whether the claim was really ungrounded, by the operator's latest action on the row."""
    return review.action == "escalate" or row.flagged == (review.action == "acknowledge")


@dataclass
class WeekScore:
    """One tenant's week: rows audited, sampled and labeled, and the weighted estimates."""

    tenant: str
    week: str
    audited: int = 0
    sampled: int = 0
    labeled: int = 0
    counts: CategoryScore = field(default_factory=CategoryScore)

    @property
    def precision(self) -> float | None:
        """Estimated share of flags that were real problems (``None`` without a labeled flag)."""
        return share(self.counts.tp, self.counts.fp)

    @property
    def recall(self) -> float | None:
        """Estimated share of real problems that were flagged (``None`` without a labeled problem)."""
        return share(self.counts.tp, self.counts.fn)


@dataclass
class Bin:
    """Labeled rows whose confidence falls in ``[low, high)``."""

    low: float
    high: float
    rows: int = 0
    confidence_sum: float = 0.0
    right: int = 0

    @property
    def mean_confidence(self) -> float | None:
        """Average stated confidence."""
        return self.confidence_sum / self.rows if self.rows else None

    @property
    def observed(self) -> float | None:
        """Share of these verdicts the operators found right."""
        return self.right / self.rows if self.rows else None


@dataclass
class AuditCalibration:
    """Per tenant and week scores, the overall estimate, the reliability table, and rows awaiting review."""

    weeks: list[WeekScore]
    total: WeekScore
    bins: list[Bin]
    unlabeled: list[AuditRow]

    def table(self) -> str:
        """The report as plain text."""

        def pct(value: float | None) -> str:
            return "-" if value is None else f"{value:.1%}"

        lines = [f"{'tenant':<20}{'week':<10}{'audited':>8}{'sampled':>8}{'labeled':>8}{'precision':>11}{'recall':>8}"]
        for score in [*self.weeks, self.total]:
            lines.append(f"{score.tenant:<20}{score.week:<10}{score.audited:>8}{score.sampled:>8}{score.labeled:>8}"
                         f"{pct(score.precision):>11}{pct(score.recall):>8}")
        lines += ["", "reliability (labeled rows): stated confidence vs observed correctness",
                  f"{'confidence':<12}{'rows':>6}{'mean conf':>11}{'observed':>10}{'gap':>8}"]
        for b in self.bins:
            gap = "-" if b.rows == 0 else f"{(b.observed or 0) - (b.mean_confidence or 0):+.2f}"
            mean = "-" if b.mean_confidence is None else f"{b.mean_confidence:.2f}"
            lines.append(f"{b.low:.1f}-{min(b.high, 1.0):.1f}{'':<5}{b.rows:>6}{mean:>11}{pct(b.observed):>10}{gap:>8}")
        lines += ["", f"{len(self.unlabeled)} sampled rows await an operator's review"]
        return "\n".join(lines)


async def calibrate(store: AuditStore, *, per_week: int = 50, seed: int = 0, tenant: str | None = None,
                    since: date | None = None, until: date | None = None) -> AuditCalibration:
    """Score the grader against operators' reviews of ``per_week`` rows sampled per tenant, week and stratum."""
    c = store.table.c
    tenant_only = [c.tenant == tenant] if tenant is not None else []
    conditions = [c.verdict != "not_graded", *within_days(c.created_at, since, until), *tenant_only]
    rows = await store.select(select(store.table).where(and_(*conditions)).order_by(c.id))
    strata: dict[tuple[str, str, bool], list[AuditRow]] = defaultdict(list)
    for row in rows:
        year, number, _ = datetime.fromtimestamp(row.created_at, UTC).isocalendar()
        strata[(row.tenant, f"{year}-W{number:02d}", row.flagged)].append(row)
    rng = random.Random(seed)
    sample: dict[tuple[str, str, bool], list[AuditRow]] = {
        key: sorted(rng.sample(members, min(per_week, len(members))), key=lambda r: r.id or 0)
        for key, members in sorted(strata.items())}
    history = await store.history([r.id for members in sample.values() for r in members if r.id is not None])
    weeks: dict[tuple[str, str], WeekScore] = {}
    total = WeekScore("all", "")
    bins = [Bin(low, high) for low, high in _BINS]
    unlabeled: list[AuditRow] = []
    for (tenant_name, week, _flagged), members in sample.items():
        score = weeks.setdefault((tenant_name, week), WeekScore(tenant_name, week))
        population = len(strata[(tenant_name, week, _flagged)])
        reviewed = [(r, history[r.id or 0][-1]) for r in members if history.get(r.id or 0)]
        unlabeled += [r for r in members if not history.get(r.id or 0)]
        for target in (score, total):
            target.audited += population
            target.sampled += len(members)
            target.labeled += len(reviewed)
        weight = population / len(reviewed) if reviewed else 0.0
        for row, review in reviewed:
            ungrounded = label(row, review)
            score.counts.add(not ungrounded, row.flagged, weight)
            total.counts.add(not ungrounded, row.flagged, weight)
            bucket = next(b for b in bins if b.low <= row.confidence < b.high)
            bucket.rows += 1
            bucket.confidence_sum += row.confidence
            bucket.right += ungrounded == row.flagged
    return AuditCalibration(list(weeks.values()), total, bins, unlabeled)
