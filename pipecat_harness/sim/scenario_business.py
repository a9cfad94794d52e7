"""A scenario's business: the database its tools act on and the tools its model may call."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pipecat_harness.sim.strict_model import StrictModel

__all__ = ["RETAIL_TOOL_NAMES", "DatabaseSpec", "TableSpec", "ToolSpec"]


_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"

#: The retail demo's tools (available when ``database.seed`` is ``retail``), read and write.
RETAIL_TOOL_NAMES = ("find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
                     "return_items", "modify_order_address", "issue_refund", "cancel_pending_order",
                     "book_callback", "reschedule_callback")


def _check_identifiers(what: str, names: Iterable[str]) -> None:
    for name in names:
        if not re.match(_IDENTIFIER, name):
            raise ValueError(f"{what} name {name!r} is not an SQL identifier (letters, digits, _)")


class TableSpec(StrictModel):
    """A table of the scenario's own business database.

    Parameters:
        columns: Column name -> SQLite column definition (type and constraints).
        rows: Rows inserted before the call; every key must be a column.
    """

    columns: dict[str, str] = Field(min_length=1)
    rows: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rows_fit(self) -> TableSpec:
        _check_identifiers("column", self.columns)
        for index, row in enumerate(self.rows):
            if unknown := ", ".join(sorted(set(row) - set(self.columns))):
                raise ValueError(f"rows[{index}] has {unknown}, which are not columns ({', '.join(self.columns)})")
        return self


class DatabaseSpec(StrictModel):
    """The business database: a named seed, the scenario's own tables, then extra SQL statements.

    Parameters:
        seed: ``retail`` (the demo's customers, orders and refunds, with its tools) or ``empty`` (declare your own).
        tables: The scenario's own tables by name: columns and rows, created after the seed.
        sql: Statements run last (to adjust seeded rows); one that fails is reported with its index.
    """

    seed: Literal["retail", "empty"] = "retail"
    tables: dict[str, TableSpec] = Field(default_factory=dict)
    sql: list[str] = Field(default_factory=list)

    @field_validator("tables")
    @classmethod
    def _table_names(cls, value: dict[str, TableSpec]) -> dict[str, TableSpec]:
        _check_identifiers("table", value)
        return value


class ToolSpec(StrictModel):
    """A tool declared by the scenario: what the model may call, and what calling it does.

    Parameters:
        name: The name the model calls it by.
        description: What it does (the model sees it in the tool's schema).
        write: Whether it changes business state (the tool gate guards writes; a barge-in never cancels one).
        parameters: JSON Schema of each argument, by name (``{booking: {type: string}}``).
        required: Arguments that must be given.
        sql: The statement it runs, arguments bound by name (``:booking``). A ``SELECT`` returns its rows; any other
            statement returns ``rows_changed`` and ``row_id``. Give ``sql`` or ``python``.
        python: ``module:function`` called as ``function(db, arguments)`` (awaited when async); its return value is the
            tool's result. ``db`` has ``query``, ``scalar`` and ``execute``.
        result: Fields added to a ``sql`` tool's result (``{status: refunded}``).
    """

    name: str = Field(pattern=_IDENTIFIER)
    description: str = ""
    write: bool = False
    parameters: dict[str, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)
    sql: str | None = None
    python: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    result: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_entry_point(self) -> ToolSpec:
        if (self.sql is None) == (self.python is None):
            raise ValueError("give exactly one of 'sql' (a statement) or 'python' (module:function)")
        if unknown := sorted(set(self.required) - set(self.parameters)):
            raise ValueError(f"required names {', '.join(unknown)}, which are not in 'parameters'")
        if self.sql is not None:
            if missing := sorted(set(re.findall(r"(?<!:):(\w+)", self.sql)) - set(self.parameters)):
                raise ValueError(f"sql binds :{', :'.join(missing)}, which are not in 'parameters'")
        return self
