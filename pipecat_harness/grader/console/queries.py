"""What the console reads from the audit store, always within the tenants the viewer may see (``None``: all)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import and_, select
from sqlalchemy.sql.elements import ColumnElement

from pipecat_harness.grader.audit import REVIEW_STATUS, AuditRow, AuditStore, within_days
from pipecat_harness.grader.verdict import CATEGORIES, FLAGGED

__all__ = ["STATUSES", "FilterError", "QueueFilter", "RatePoint", "call_rows", "flagged_rows", "tenant_rates",
           "tenants"]

STATUSES = ("open", *REVIEW_STATUS.values())
_SEVERITIES = ("info", "warning", "critical")


class FilterError(ValueError):
    """A filter value that is not allowed; the message names the parameter."""


@dataclass(frozen=True)
class QueueFilter:
    """The queue's filters, all optional; ``since`` and ``until`` are UTC days, both included."""

    tenant: str | None = None
    severity: str | None = None
    category: str | None = None
    status: str | None = None
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> QueueFilter:
        """Read filters from query parameters (empty means "any"); ``FilterError`` for a bad choice or date."""

        def choice(name: str, allowed: Collection[str]) -> str | None:
            value = (params.get(name) or "").strip()
            if value and value not in allowed:
                raise FilterError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
            return value or None

        def day(name: str) -> date | None:
            value = (params.get(name) or "").strip()
            try:
                return date.fromisoformat(value) if value else None
            except ValueError:
                raise FilterError(f"{name} must be a date like 2026-05-31, got {value!r}") from None

        tenant = (params.get("tenant") or "").strip() or None
        allowed = {"severity": _SEVERITIES, "category": CATEGORIES, "status": STATUSES}
        severity, category, status = (choice(name, values) for name, values in allowed.items())
        return cls(tenant, severity, category, status, day("since"), day("until"))

    def params(self) -> dict[str, str]:
        """The filters as query parameters (set ones only)."""
        return {name: v.isoformat() if isinstance(v, date) else v for name, v in vars(self).items() if v}


def _scope(store: AuditStore, visible: Collection[str] | None) -> list[ColumnElement[bool]]:
    return [] if visible is None else [store.table.c.tenant.in_(sorted(visible))]


async def flagged_rows(store: AuditStore, filters: QueueFilter, visible: Collection[str] | None = None, *,
                       limit: int = 200) -> list[AuditRow]:
    """Flagged rows matching the filters, newest first."""
    c = store.table.c
    chosen = [(c.tenant, filters.tenant), (c.severity, filters.severity), (c.category, filters.category)]
    where = [column == value for column, value in chosen if value is not None]
    where += within_days(c.created_at, filters.since, filters.until)
    return await store.flagged(*where, limit=limit, status=filters.status, tenants=visible)


async def call_rows(store: AuditStore, tenant: str, call_id: str,
                    visible: Collection[str] | None = None) -> list[AuditRow]:
    """Every row of one call, in turn order (the call's transcript as graded)."""
    c = store.table.c
    query = select(store.table).where(and_(c.tenant == tenant, c.call_id == call_id, *_scope(store, visible)))
    return await store.select(query.order_by(c.turn_id, c.id))


async def tenants(store: AuditStore, visible: Collection[str] | None = None) -> list[str]:
    """Tenants with audit rows."""
    c = store.table.c
    query = select(c.tenant).distinct().where(*_scope(store, visible)).order_by(c.tenant)
    async with store.engine.connect() as conn:
        return [r[0] for r in (await conn.execute(query)).all()]


@dataclass(frozen=True)
class RatePoint:
    """One UTC day of a tenant's graded turns, and how many had a flagged or an ``out_of_scope`` claim."""

    day: date
    turns: int
    flagged: int
    out_of_scope: int

    @property
    def flag_rate(self) -> float:
        """Flagged turns per graded turn."""
        return self.flagged / self.turns if self.turns else 0.0

    @property
    def out_of_scope_rate(self) -> float:
        """Out-of-scope turns per graded turn."""
        return self.out_of_scope / self.turns if self.turns else 0.0


async def tenant_rates(store: AuditStore, tenant: str, *, days: int = 30, today: date | None = None) -> list[RatePoint]:
    """Per day over the last ``days`` days: graded turns, and how many were flagged or out of scope."""
    last = today or datetime.now(UTC).date()
    first = last - timedelta(days=days - 1)
    c = store.table.c
    query = select(c.created_at, c.call_id, c.turn_id, c.verdict).where(
        and_(c.tenant == tenant, *within_days(c.created_at, first, last)))
    turns: dict[tuple[str, int], tuple[date, set[str]]] = {}
    async with store.engine.connect() as conn:
        for created_at, call_id, turn_id, verdict in (await conn.execute(query)).all():
            day = datetime.fromtimestamp(created_at, UTC).date()
            turns.setdefault((call_id, turn_id), (day, set()))[1].add(verdict)
    per_day: dict[date, list[set[str]]] = {first + timedelta(days=i): [] for i in range(days)}
    for day, verdicts in turns.values():
        per_day[day].append(verdicts)
    return [RatePoint(day, len(seen), sum(bool(v & FLAGGED) for v in seen), sum("out_of_scope" in v for v in seen))
            for day, seen in per_day.items()]
