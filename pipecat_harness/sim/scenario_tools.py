"""The tools and tables a scenario declares, made real: SQLite tables, Pipecat tool schemas, async handlers.

A scenario's ``database.tables`` are created (and their rows inserted) after
the named seed; each of its ``tools`` becomes a Pipecat ``FunctionSchema`` in
the model's context and a framework-free handler the harness registers like
any bot's tool: a ``sql`` tool runs its statement with the arguments bound by
name, a ``python`` tool calls ``module:function(db, arguments)``. With the
``retail`` seed the retail demo's tools are offered as well.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import aiosqlite
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema

from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, ToolHandler
from pipecat_harness.sim.scenario import Scenario, ScenarioError, ToolSpec
from pipecat_harness.tools.operation_state import OperationRecord, Reconciliation

__all__ = ["ScenarioTools", "create_tables"]


async def create_tables(scenario: Scenario, db: RetailDatabase) -> None:
    """Create the scenario's own tables and insert their rows.

    Raises:
        ScenarioError: A table cannot be created or a row inserted; the message names the table and row.
    """
    for table, spec in scenario.database.tables.items():
        columns = ", ".join(f"{name} {definition}" for name, definition in spec.columns.items())
        where = f"{scenario.source or scenario.name}: field 'database.tables.{table}'"
        try:
            await db.execute(f"CREATE TABLE {table} ({columns})")
        except Exception as exc:  # sqlite3 errors: the scenario's definition is wrong
            raise ScenarioError(f"{where}: cannot create the table ({exc}); fix its columns") from exc
        for index, row in enumerate(spec.rows):
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            try:
                await db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(row.values()))
            except Exception as exc:
                raise ScenarioError(f"{where}.rows[{index}]: cannot insert the row ({exc}); fix its values") from exc


def _sql_handler(spec: ToolSpec, db: RetailDatabase) -> ToolHandler:
    statement = spec.sql or ""
    is_read = statement.lstrip().split(None, 1)[0].lower() in {"select", "with"}

    async def run(arguments: Mapping[str, Any]) -> Any:
        bound = {name: arguments.get(name) for name in spec.parameters}
        async with aiosqlite.connect(db.path) as conn:
            conn.row_factory = aiosqlite.Row
            async with conn.execute(statement, bound) as cursor:
                if is_read:
                    return {"rows": [dict(row) for row in await cursor.fetchall()], **spec.result}
                changed, row_id = cursor.rowcount, cursor.lastrowid
            await conn.commit()
        return {"rows_changed": changed, "row_id": row_id, **spec.result}

    run.__name__ = spec.name
    return run


def _python_handler(spec: ToolSpec, db: RetailDatabase, source: str) -> ToolHandler:
    module_name, _, function_name = (spec.python or "").partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise ScenarioError(f"{source}: field 'tools.{spec.name}.python': cannot import {spec.python} ({exc}); "
                            "check the module is importable and defines the function") from exc

    async def run(arguments: Mapping[str, Any]) -> Any:
        result = function(db, dict(arguments))
        return await result if inspect.isawaitable(result) else result

    run.__name__ = spec.name
    return run


class ScenarioTools:
    """The tools of one simulated call: the scenario's own, plus the retail demo's on the retail seed.

    Args:
        scenario: The scenario.
        db: The call's business database.

    Raises:
        ScenarioError: A ``python`` tool's entry point cannot be imported.
    """

    def __init__(self, scenario: Scenario, db: RetailDatabase) -> None:
        self._retail = RetailTools(db) if scenario.database.seed == "retail" else None
        source = scenario.source or scenario.name
        self._own: dict[str, ToolHandler] = {
            spec.name: _sql_handler(spec, db) if spec.sql is not None else _python_handler(spec, db, source)
            for spec in scenario.tools
        }
        self._schemas = [FunctionSchema(name=spec.name, description=spec.description or spec.name,
                                        properties=spec.parameters, required=spec.required)
                         for spec in scenario.tools]
        own_writes = {spec.name for spec in scenario.tools if spec.write}
        self.write_tools = frozenset(own_writes | (RETAIL_WRITE_TOOLS if self._retail is not None else set()))

    def schemas(self) -> ToolsSchema:
        """The tool schemas to put in the ``LLMContext``."""
        retail = list(self._retail.schemas().standard_tools) if self._retail is not None else []
        return ToolsSchema(standard_tools=retail + self._schemas)

    def handlers(self) -> dict[str, ToolHandler]:
        """The framework-free handlers by tool name."""
        return {**(self._retail.handlers() if self._retail is not None else {}), **self._own}

    async def reconcile(self, record: OperationRecord) -> Reconciliation | None:
        """What became of a write of unknown outcome: the retail backend can tell; the scenario's own tools cannot.

        A declared tool keeps no record of the operations it applied, so its
        outcome stays unknown (``None``) rather than being guessed.
        """
        if self._retail is not None and record.op_type not in self._own:
            return await self._retail.reconcile(record)
        return None

    def argument_normalizers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """Per tool, the canonical form of its arguments (the retail tools' order ids)."""
        return self._retail.argument_normalizers() if self._retail is not None else {}
