"""A tenant's facts (price list, hours, policies, capabilities, promotions), loaded from YAML or JSON with a schema.

Policy values are identifiers written in words (:func:`policy_statement`). A list without a ``version`` is named by a
hash of its content, so an audit row always says which facts the grader checked against.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipecat_harness.bundled import resolve_data_path
from pipecat_harness.errors import InputError
from pipecat_harness.validation import load_mapping_file

__all__ = ["WEEKDAYS", "ConstraintError", "ConstraintList", "ConstraintStore", "DayHours", "Integration", "PriceItem",
           "Promotion", "StaffMember", "policy_statement"]

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_GROUPS = {"mon_fri": WEEKDAYS[:5], "weekdays": WEEKDAYS[:5], "sat_sun": WEEKDAYS[5:], "weekends": WEEKDAYS[5:],
               "weekend": WEEKDAYS[5:], "daily": WEEKDAYS, "every_day": WEEKDAYS, "mon_sat": WEEKDAYS[:6]}
_HOURS_RE = re.compile(r"^\s*(\d{1,2}):?(\d{2})?\s*-\s*(\d{1,2}):?(\d{2})?\s*$")
_ABBREVIATIONS = {"h": "hours", "hr": "hours", "hrs": "hours", "d": "days", "min": "minutes", "mins": "minutes"}


class ConstraintError(InputError):
    """A constraint list that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PriceItem(_Strict):
    """One priced service: exactly one of ``price_usd`` or ``price`` (in ``currency``); ``price_max`` ends a range."""

    id: str = Field(min_length=1)
    service: str = Field(min_length=1)
    price_usd: float | None = Field(default=None, ge=0)
    price: float | None = Field(default=None, ge=0)
    price_max: float | None = Field(default=None, ge=0)
    currency: str = "USD"
    aliases: tuple[str, ...] = ()
    duration_minutes: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_price(self) -> PriceItem:
        if (self.price_usd is None) == (self.price is None):
            raise ValueError("give exactly one of price_usd or price")
        if self.price_usd is not None and self.currency.upper() != "USD":
            raise ValueError("price_usd is in USD; use price with currency for other currencies")
        return self

    @property
    def amount(self) -> float:
        """The listed price in :attr:`currency`."""
        return float(self.price_usd if self.price_usd is not None else self.price or 0.0)

    @property
    def names(self) -> tuple[str, ...]:
        """The service name and its aliases, lower case."""
        return (self.service.lower(), *(a.lower() for a in self.aliases))


class Promotion(_Strict):
    """A promotion the agent may mention."""

    id: str = Field(min_length=1)
    description: str = ""
    discount_percent: float | None = Field(default=None, gt=0, le=100)
    discount_usd: float | None = Field(default=None, gt=0)
    services: tuple[str, ...] = ()


class Integration(_Strict):
    """A business system the agent can read ("order system"), and the kinds of record it reads there ("orders")."""

    id: str = Field(min_length=1)
    system: str = Field(min_length=1)
    records: tuple[str, ...] = ()


class StaffMember(_Strict):
    """A person or team calls can be transferred to, by ``name`` ("Dr. Patel", "billing team") or ``role``."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    role: str = ""


class DayHours(_Strict):
    """Opening hours of one weekday (``None`` times mean closed)."""

    opens: time | None = None
    closes: time | None = None

    @property
    def closed(self) -> bool:
        """Whether the business is closed that day."""
        return self.opens is None


class ConstraintList(_Strict):
    """One version of a tenant's facts.

    ``hours`` are given per weekday or group (``mon_fri``, ``sat``) as ``"08:00-18:00"`` or ``"closed"``, in the IANA
    ``timezone``; ``policies`` map a name to an identifier written in words; ``capabilities`` are what the agent does.
    """

    tenant: str = "default"
    version: str | None = None
    timezone: str = "UTC"
    price_list: tuple[PriceItem, ...] = ()
    hours: dict[str, str] = Field(default_factory=dict)
    policies: dict[str, str] = Field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    integrations: tuple[Integration, ...] = ()
    staff: tuple[StaffMember, ...] = ()
    promotions: tuple[Promotion, ...] = ()

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @field_validator("hours")
    @classmethod
    def _valid_hours(cls, value: dict[str, str]) -> dict[str, str]:
        for key, spec in value.items():
            if key not in WEEKDAYS and key not in _DAY_GROUPS:
                raise ValueError(f"unknown day {key!r}; use {', '.join(WEEKDAYS)} or {', '.join(_DAY_GROUPS)}")
            _parse_hours(spec, key)
        return value

    @field_validator("price_list")
    @classmethod
    def _unique_ids(cls, value: tuple[PriceItem, ...]) -> tuple[PriceItem, ...]:
        ids = [item.id for item in value]
        if duplicates := sorted({i for i in ids if ids.count(i) > 1}):
            raise ValueError(f"duplicate price ids {duplicates}")
        return value

    @property
    def version_id(self) -> str:
        """The explicit version, or ``sha-<first 12 hex digits>`` of the content."""
        if self.version:
            return self.version
        # Fields added later: absent ones keep older lists' hashes.
        content = {k: v for k, v in self.model_dump(mode="json").items() if v or k not in ("integrations", "staff")}
        digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
        return f"sha-{digest[:12]}"

    def week(self) -> dict[str, DayHours]:
        """Hours per weekday; days the list does not mention are absent."""
        week: dict[str, DayHours] = {}
        for key in sorted(self.hours, key=lambda k: k in WEEKDAYS):  # single days override groups
            week.update(dict.fromkeys(_DAY_GROUPS.get(key, (key,)), _parse_hours(self.hours[key], key)))
        return week

    def statements(self) -> dict[str, str]:
        """Every policy as a sentence-like statement, by policy name."""
        return {name: policy_statement(value) for name, value in self.policies.items()}

    @classmethod
    def from_data(cls, data: Any, *, source: str = "<data>") -> ConstraintList:
        """Validate a mapping; ``ConstraintError`` when it does not match the schema."""
        if not isinstance(data, dict):
            raise ConstraintError(f"{source}: a constraint list must be a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '<root>'}: {err['msg']}" for err in exc.errors())
            raise ConstraintError(f"{source}: invalid constraint list: {problems}") from exc

    @classmethod
    def load(cls, path: str | Path) -> ConstraintList:
        """Load a YAML or JSON file, or a bundled list (``bundled:retail``); ``ConstraintError`` when it is unusable."""
        try:
            path = resolve_data_path(path, "constraint list")
        except InputError as exc:
            raise ConstraintError(str(exc)) from exc
        return cls.from_data(load_mapping_file(path, what="constraint list", error=ConstraintError), source=str(path))


def _parse_hours(spec: str, key: str) -> DayHours:
    spec = str(spec).strip().lower()
    if spec == "closed":
        return DayHours()
    if spec in ("24h", "open_24h", "00:00-24:00"):
        return DayHours(opens=time(0, 0), closes=time(23, 59))
    match = _HOURS_RE.match(spec)
    if not match:
        raise ValueError(f"hours for {key!r} must be 'HH:MM-HH:MM' or 'closed', got {spec!r}")
    oh, om, ch, cm = (int(g or 0) for g in match.groups())
    if oh > 23 or ch > 24 or om > 59 or cm > 59:
        raise ValueError(f"hours for {key!r} out of range: {spec!r}")
    closes = time(23, 59) if ch == 24 else time(ch, cm)
    if closes <= time(oh, om):
        raise ValueError(f"hours for {key!r} close before they open: {spec!r}")
    return DayHours(opens=time(oh, om), closes=closes)


def policy_statement(identifier: str) -> str:
    """Read a policy identifier as a statement: ``free_up_to_24h_before`` -> "free up to 24 hours before"."""
    words = [w for w in re.split(r"[_\s\-]+", identifier.strip().lower()) if w]
    expanded: list[str] = []
    for word in words:
        match = re.fullmatch(r"(\d+)([a-z]+)", word)
        if match and match.group(2) in _ABBREVIATIONS:
            expanded += [match.group(1), _ABBREVIATIONS[match.group(2)]]
        else:
            expanded.append(_ABBREVIATIONS.get(word, word) if expanded and expanded[-1].isdigit() else word)
    clauses: list[list[str]] = [[]]
    for word in expanded:
        if word == "no" and clauses[-1]:
            clauses.append([])
        clauses[-1].append(word)
        if word == "only":
            clauses.append([])
    split: list[list[str]] = []
    for clause in clauses:
        # "no cash refunds store credit only": the refusal ends at its plural noun.
        plural = next((i for i, w in enumerate(clause[2:], 2) if w.endswith("s")), None)
        if clause and clause[0] == "no" and clause[-1] == "only" and plural is not None and plural < len(clause) - 2:
            split += [clause[: plural + 1], clause[plural + 1 :]]
        else:
            split.append(clause)
    return ", ".join(" ".join(c) for c in split if c)


class ConstraintStore:
    """Versioned constraint lists on disk (``<directory>/<tenant>/v<N>.json``): every publish is a new version."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def versions(self, tenant: str) -> list[int]:
        """Published version numbers of a tenant, oldest first."""
        return sorted(int(p.stem[1:]) for p in self._folder(tenant).glob("v*.json") if p.stem[1:].isdigit())

    def publish(self, constraints: ConstraintList) -> ConstraintList:
        """Store ``constraints`` as the tenant's next version and return it with ``version`` set."""
        folder = self._folder(constraints.tenant)
        folder.mkdir(parents=True, exist_ok=True)
        number = (self.versions(constraints.tenant) or [0])[-1] + 1
        published = constraints.model_copy(update={"version": f"v{number}"})
        with (folder / f"v{number}.json").open("x", encoding="utf-8") as handle:  # never overwrite a version
            json.dump(published.model_dump(mode="json"), handle, indent=2, sort_keys=True)
        return published

    def get(self, tenant: str, version: int | None = None) -> ConstraintList:
        """Return a tenant's version (the latest when ``version`` is ``None``); ``ConstraintError`` if there is none."""
        versions = self.versions(tenant)
        if not versions:
            raise ConstraintError(f"{self.directory}: no constraint lists for tenant {tenant!r}")
        number = versions[-1] if version is None else version
        if number not in versions:
            raise ConstraintError(f"{self.directory}: tenant {tenant!r} has no version {number}; has {versions}")
        return ConstraintList.load(self._folder(tenant) / f"v{number}.json")

    def _folder(self, tenant: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", tenant) or tenant.startswith("."):
            raise ConstraintError(f"tenant {tenant!r} must be letters, digits, '.', '_' or '-'")
        return self.directory / tenant
