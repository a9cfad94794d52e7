"""Callback booking over the demo database: a write that must be confirmed by the caller first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema

from pipecat_harness.demo.retail_db import CALLBACK_TABLE_SQL, RetailDatabase
from pipecat_harness.demo.retail_tools import ToolHandler

__all__ = ["CALLBACK_TABLE_SQL", "CALLBACK_WRITE_TOOLS", "CallbackTools"]

#: Tools that change business state.
CALLBACK_WRITE_TOOLS = frozenset({"schedule_callback"})

_DAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

_SCHEMAS = [FunctionSchema(
    name="schedule_callback",
    description="Book a callback from an agent. Read the day, time and timezone back and get a yes first.",
    properties={"day": {"type": "string", "description": "Weekday, e.g. Friday"},
                "time": {"type": "string", "description": "24-hour local time, e.g. 18:00"},
                "timezone": {"type": "string", "description": "IANA timezone, e.g. Asia/Singapore"}},
    required=["day", "time", "timezone"])]


class CallbackTools:
    """The callback tools bound to a demo database."""

    def __init__(self, db: RetailDatabase) -> None:
        self.db = db

    @staticmethod
    def schemas() -> list[FunctionSchema]:
        """The tools' schemas."""
        return list(_SCHEMAS)

    def handlers(self) -> dict[str, ToolHandler]:
        """Framework-free handlers by tool name."""
        return {"schedule_callback": self.schedule_callback}

    @staticmethod
    def argument_normalizers() -> dict[str, Any]:
        """Weekdays compare case-insensitively."""

        def normalize(arguments: dict[str, Any]) -> dict[str, Any]:
            day = arguments.get("day")
            return {**arguments, "day": day.strip().capitalize()} if isinstance(day, str) else arguments

        return {"schedule_callback": normalize}

    async def schedule_callback(self, args: Mapping[str, Any]) -> Any:
        """Book the callback."""
        day = str(args.get("day", "")).strip().capitalize()
        if day.lower() not in _DAYS:
            return {"error": f"day must be a weekday, got {args.get('day')!r}"}
        await self.db.execute(CALLBACK_TABLE_SQL)
        row = (day, str(args.get("time", "")), str(args.get("timezone", "")))
        callback_id = await self.db.execute("INSERT INTO callbacks (day, time, timezone) VALUES (?, ?, ?)", row)
        booked = {"callback_id": callback_id, "day": day, "time": args.get("time"), "timezone": args.get("timezone")}
        return {**booked, "status": "booked"}
