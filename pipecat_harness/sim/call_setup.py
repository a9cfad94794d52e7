"""What a simulated call is set up with: its database, tool sets, settings and backend faults."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pipecat_harness.config import HarnessConfig
from pipecat_harness.demo.callbacks import CallbackTools
from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.demo.retail_tools import ToolHandler
from pipecat_harness.sim.scenario import Scenario, ScenarioError, ToolFault
from pipecat_harness.sim.scenario_tools import create_tables
from pipecat_harness.validation import describe_validation_error

__all__ = ["create_database", "fault_wrapper", "scenario_config", "tool_sets"]


def scenario_config(scenario: Scenario, config: HarnessConfig) -> HarnessConfig:
    """``config`` with the scenario's own settings applied (its switches as given); a bad one is a ScenarioError."""
    update = {}
    where = scenario.source or scenario.name
    for block, values in scenario.harness.items():
        current = getattr(config, block, None)
        if not isinstance(current, BaseModel) or not isinstance(values, dict):
            raise ScenarioError(f"{where}: field 'harness.{block}' is not a settings block")
        settings = {k: v for k, v in values.items() if k != "enabled"}
        try:
            update[block] = type(current).model_validate({**current.model_dump(), **settings})
        except ValidationError as exc:
            raise ScenarioError(f"{where}: harness.{block}: {describe_validation_error(exc)}") from exc
    return config.model_copy(update=update) if update else config


async def tool_sets(scenario: Scenario, db: RetailDatabase) -> list[Any]:
    """The demo tool sets the scenario adds to the retail tools."""
    extra: list[Any] = []
    for name in scenario.tools:
        if name == "callbacks":
            extra.append(CallbackTools(db))
        elif name == "policies":
            from pipecat_harness.demo.policies import PolicyTools

            extra.append(await PolicyTools.create())
    return extra


async def create_database(scenario: Scenario, workdir: Path) -> RetailDatabase:
    """The call's business database: the named seed, the scenario's own tables, then its statements one by one."""
    path = workdir / f"{scenario.name}.db"
    # The empty seed is an empty database: the scenario's own tables may reuse the retail names.
    db = await RetailDatabase.create(path, seed=None) if scenario.database.seed == "retail" else RetailDatabase(path)
    await create_tables(scenario, db)
    for index, statement in enumerate(scenario.database.sql):
        try:
            await db.execute(statement)
        except Exception as exc:  # sqlite3 errors: the scenario's SQL is wrong, not the simulator
            raise ScenarioError(
                f"{scenario.source or scenario.name}: field 'database.sql[{index}]': the statement failed "
                f"({exc}); fix it against the {scenario.database.seed!r} schema"
            ) from exc
    return db


def fault_wrapper(faults: list[ToolFault], counts: dict[str, int]) -> Callable[[str, ToolHandler], ToolHandler]:
    """Wrap business handlers so scripted backend faults happen under the tool layer."""

    def wrap(name: str, handler: ToolHandler) -> ToolHandler:
        async def call(arguments: Mapping[str, Any]) -> Any:
            counts[name] = counts.get(name, 0) + 1
            occurrence = counts[name]
            fault = next((f for f in faults if f.tool == name and f.occurrence == occurrence), None)
            if fault is None:
                return await handler(arguments)
            if fault.kind == "raise":
                raise RuntimeError(fault.message)
            if fault.kind == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(fault.secs)
            result = await handler(arguments)
            if fault.kind == "lost_reply":
                raise TimeoutError(fault.message)
            return result

        call.__name__ = name
        return call

    return wrap
