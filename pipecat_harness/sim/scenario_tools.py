"""The tools and tables a scenario declares, made real: SQLite tables, Pipecat tool schemas, async handlers."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import aiosqlite
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema

from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, ToolHandler, pipecat_function
from pipecat_harness.sim.scenario import Scenario, ScenarioError, ToolSpec
from pipecat_harness.tools.execution import current_operation
from pipecat_harness.tools.operation_state import OperationRecord, OperationStatus, Reconciliation

__all__ = ["APPLIED_OPERATIONS_DDL", "ScenarioTools", "create_tables"]


#: The table in which writes record their idempotency key (the same as the retail schema's).
APPLIED_OPERATIONS_DDL = """CREATE TABLE IF NOT EXISTS applied_operations (
    idempotency_key TEXT PRIMARY KEY, op_type TEXT NOT NULL, request_hash TEXT NOT NULL,
    result TEXT NOT NULL, applied_at TEXT DEFAULT CURRENT_TIMESTAMP
)"""


async def create_tables(scenario: Scenario, db: RetailDatabase) -> None:
    """Create the record of applied writes and the scenario's own tables with their rows (errors name table and row)."""
    await db.execute(APPLIED_OPERATIONS_DDL)
    for table, spec in scenario.database.tables.items():
        columns = ", ".join(f"{name} {definition}" for name, definition in spec.columns.items())
        where = f"{scenario.source or scenario.name}: field 'database.tables.{table}'"
        try:
            await db.execute(f"CREATE TABLE {table} ({columns})")
        except Exception as exc:  # sqlite3 errors: the scenario's definition is wrong
            raise ScenarioError(f"{where}: cannot create the table ({exc}); fix its columns") from exc
        for index, row in enumerate(spec.rows):
            insert = f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})"
            try:
                await db.execute(insert, tuple(row.values()))
            except Exception as exc:
                raise ScenarioError(f"{where}.rows[{index}]: cannot insert the row ({exc}); fix its values") from exc


def _sql_handler(spec: ToolSpec, db: RetailDatabase) -> ToolHandler:
    statement = spec.sql or ""
    is_read = statement.lstrip().split(None, 1)[0].lower() in {"select", "with"}

    async def run(arguments: Mapping[str, Any]) -> Any:
        bound = {name: arguments.get(name) for name in spec.parameters}
        if is_read:
            async with aiosqlite.connect(db.path) as conn:
                conn.row_factory = aiosqlite.Row
                async with conn.execute(statement, bound) as cursor:
                    return {"rows": [dict(row) for row in await cursor.fetchall()], **spec.result}

        async def apply(conn: aiosqlite.Connection) -> Any:
            cursor = await conn.execute(statement, bound)
            return {"rows_changed": cursor.rowcount, "row_id": cursor.lastrowid, **spec.result}

        # As in the retail backend, a write is applied once per idempotency key of the tool gate and the key is recorded
        # with it, so a write of unknown outcome can be reconciled.
        operation = current_operation()
        key, request_hash = (operation.idempotency_key, operation.request_hash) if operation else (None, "")
        return await db.apply_once(key, spec.name, request_hash, apply)

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

    ``with_retail=False`` leaves the retail tools out (the call pipeline adds them itself). A ``python`` tool whose
    entry point cannot be imported is a ScenarioError.
    """

    def __init__(self, scenario: Scenario, db: RetailDatabase, *, with_retail: bool = True) -> None:
        self._retail = RetailTools(db) if with_retail and scenario.database.seed == "retail" else None
        source = scenario.source or scenario.name
        self._own: dict[str, ToolHandler] = {spec.name: _sql_handler(spec, db) if spec.sql is not None
                                             else _python_handler(spec, db, source) for spec in scenario.own_tools}
        self._schemas = [FunctionSchema(spec.name, spec.description or spec.name, spec.parameters, spec.required)
                         for spec in scenario.own_tools]
        own_writes = {spec.name for spec in scenario.own_tools if spec.write}
        self._db = db
        self._sql_tools = {spec.name for spec in scenario.own_tools if spec.sql is not None}
        self.write_tools = frozenset(own_writes | (RETAIL_WRITE_TOOLS if self._retail is not None else set()))

    def schemas(self) -> list[FunctionSchema]:
        """The tool schemas to put in the ``LLMContext`` (as a tool set of the call pipeline)."""
        retail = list(self._retail.schemas().standard_tools) if self._retail is not None else []
        return [*retail, *self._schemas]

    def handlers(self) -> dict[str, ToolHandler]:
        """The framework-free handlers by tool name."""
        return {**(self._retail.handlers() if self._retail is not None else {}), **self._own}

    def register(self, llm: Any, *, wrap: Callable[[str, ToolHandler], ToolHandler] | None = None) -> None:
        """Register every tool straight on a Pipecat LLM service (a call with no harness: the baseline)."""
        for name, handler in self.handlers().items():
            function = pipecat_function(wrap(name, handler) if wrap else handler)
            llm.register_function(name, function, cancel_on_interruption=name not in self.write_tools)

    async def reconcile(self, record: OperationRecord) -> Reconciliation | None:
        """What became of a write of unknown outcome: applied (with its result) or not applied.

        Retail and SQL writes record their idempotency key with the write; a Python tool records nothing, so its outcome
        stays unknown (``None``) rather than being guessed.
        """
        if self._retail is not None and record.op_type not in self._own:
            return await self._retail.reconcile(record)
        if record.op_type not in self._sql_tools:
            return None
        if (result := await self._db.applied(record.idempotency_key)) is not None:
            return Reconciliation(OperationStatus.SUCCEEDED, result=result)
        # Not applied, and the gate asks only once no request of the attempt is under way: the database applies each key
        # once, so the retry under the same key cannot add a second.
        error = "the scenario's database has no record of this write"
        return Reconciliation(OperationStatus.FAILED, error=error, voided=record.attempt)

    def argument_normalizers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """Per tool, the canonical form of its arguments (the retail tools' order ids)."""
        return self._retail.argument_normalizers() if self._retail is not None else {}
