"""The words a deployment keys its recogniser with: the business's terms and the names it serves."""

from __future__ import annotations

from typing import Any

__all__ = ["DOMAIN_TERMS", "recogniser_vocabulary"]

#: The terms each business's deployment keys (what a Deepgram keyterm list for it would hold).
DOMAIN_TERMS: dict[str, tuple[str, ...]] = {
    "retail": ("refund", "return", "exchange", "order number", "zip code", "email"),
    "airline": ("booking code", "rebooked", "flight", "passenger", "fee refund", "zip code"),
    "telecom": ("roaming", "roaming charge", "line number", "plan change", "credit", "account"),
}

_NAME_COLUMNS = ("first_name", "last_name")


def recogniser_vocabulary(scenario: Any) -> str:
    """The hotwords for ``scenario``'s call: its domain's terms, then its database's people as ``First Last``."""
    rows: list[dict[str, Any]] = []
    if scenario.database.seed == "retail":
        from pipecat_harness.demo.retail_db import DEFAULT_SEED

        rows.extend(DEFAULT_SEED["customers"])
    for table in scenario.database.tables.values():
        rows.extend(table.rows)
    names = [" ".join(str(row[c]) for c in _NAME_COLUMNS) for row in rows if all(row.get(c) for c in _NAME_COLUMNS)]
    return ", ".join([*DOMAIN_TERMS.get(scenario.domain, ()), *dict.fromkeys(names)])
