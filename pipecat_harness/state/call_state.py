"""What the bot knows about one call: conversation history, working state and business state.

Kept apart as they are trusted differently: working facts carry provenance (who said so, when) and a version, business
state the provenance of its read. The record's version grows with each change, saved under the per-call lock.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.store import StateStore, parse_record
from pipecat_harness.validation import describe_validation_error

__all__ = ["CallState", "CallStateStore", "Fact", "Provenance", "Source", "VersionConflict"]

Source = Literal["caller", "tool", "model", "operator", "system"]


@dataclass(frozen=True)
class Provenance:
    """Where a value came from: who, in which user turn, when, and the tool, utterance or operator id (``detail``)."""

    source: Source
    turn_id: int = 0
    detail: str = ""
    at: float = field(default_factory=time.time)


@dataclass
class Fact:
    """One working-state value with its provenance and version (1 on first set)."""

    value: Any
    provenance: Provenance
    version: int = 1


@dataclass
class CallState:
    """The three memories of one call, and what is open in it.

    ``pending``: open items (a time not yet given, a proposal awaiting confirmation) as facts; ``operations``: by id,
    the tool, status, arguments, turn and tool call; ``delivery``: how the last reply reached the caller.
    """

    call_id: str
    history: list[dict[str, Any]] = field(default_factory=list)
    working: dict[str, Fact] = field(default_factory=dict)
    business: dict[str, Any] = field(default_factory=dict)
    business_provenance: Provenance | None = None
    version: int = 0
    pending: dict[str, Fact] = field(default_factory=dict)
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    delivery: dict[str, Any] = field(default_factory=dict)

    def add_message(self, role: str, content: str, *, turn_id: int) -> None:
        """Append a conversation message."""
        self.history.append({"role": role, "content": content, "turn_id": turn_id})

    def set_fact(self, name: str, value: Any, provenance: Provenance) -> bool:
        """Set a working fact; return whether its value changed (the same value keeps version and provenance)."""
        current = self.working.get(name)
        if current is not None and current.value == value:
            return False
        self.working[name] = Fact(value, provenance, 1 if current is None else current.version + 1)
        return True

    def fact(self, name: str) -> Fact | None:
        """The fact named ``name``, if known."""
        return self.working.get(name)

    def set_business(self, snapshot: dict[str, Any], provenance: Provenance) -> None:
        """Replace the business snapshot."""
        self.business = dict(snapshot)
        self.business_provenance = provenance

    def to_dict(self, *, exclude: set[str] | None = None) -> dict[str, Any]:
        """JSON-serialisable form (a new structure each call), without the fields in ``exclude``."""
        return _STATE.dump_python(self, mode="json", exclude=exclude)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallState:
        """Rebuild from :meth:`to_dict` output (``ValueError`` if it is not a call state)."""
        try:
            return _STATE.validate_python(data)
        except ValidationError as exc:
            raise ValueError(f"not a call state: {describe_validation_error(exc)}") from exc


_STATE: TypeAdapter[CallState] = TypeAdapter(CallState)


class VersionConflict(RuntimeError):
    """The state changed since the version a write was based on."""


class CallStateStore:
    """Loads and updates :class:`CallState` records in a :class:`StateStore`, kept ``ttl_secs`` after a change."""

    def __init__(self, store: StateStore, *, lock: CallLock | None = None, ttl_secs: float = 24 * 3600.0) -> None:
        self.store = store
        self.lock = lock or CallLock(store, ttl_secs=1.0, work_timeout_secs=2.0)
        self.ttl_secs = ttl_secs

    @staticmethod
    def _key(call_id: str) -> str:
        return f"call_state:{call_id}"

    async def load(self, call_id: str) -> CallState:
        """The call's state (empty for a new call; ``StoreError`` if the stored record is corrupt)."""
        return self._parsed(call_id, await self.store.get_json(self._key(call_id)))

    @staticmethod
    def _parsed(call_id: str, raw: Any | None) -> CallState:
        return parse_record(raw, CallState.from_dict, lambda: CallState(call_id=call_id), label=f"call {call_id!r}")

    async def update(self, call_id: str, change: Callable[[CallState], Awaitable[Any] | Any], *,
                     expected_version: int | None = None) -> CallState:
        """Apply ``change`` under the lock and save it (``VersionConflict`` if not at ``expected_version``)."""

        async def work(values: tuple[Any | None, ...]) -> CallState:
            state = self._parsed(call_id, values[0])
            if expected_version is not None and state.version != expected_version:
                raise VersionConflict(f"call {call_id!r}: state is at version {state.version}, update was based on "
                                      f"{expected_version}")
            result = change(state)
            if inspect.isawaitable(result):
                await result
            state.version += 1
            await self.lock.write(self._key(call_id), state.to_dict(), ttl_secs=self.ttl_secs)
            return state

        return await self.lock.run_reading(call_id, (self._key(call_id),), work)
