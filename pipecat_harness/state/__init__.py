"""Per-call shared state: store interface, memory and Redis backends, lock, debounce and call state."""

from typing import Any

from pipecat_harness.state.call_state import CallState, CallStateStore, Fact, Provenance, VersionConflict
from pipecat_harness.state.coordination import CallLock, LockTimeout, Superseded, TranscriptDebouncer
from pipecat_harness.state.factory import create_store
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.store import LockedRead, NewestGate, StateStore, StoreError

__all__ = ["CallLock", "CallState", "CallStateStore", "Fact", "LockTimeout", "LockedRead", "MemoryStateStore",
           "NewestGate", "Provenance", "RedisStateStore", "StateStore", "StoreError", "Superseded",
           "TranscriptDebouncer", "VersionConflict", "create_store"]


def __getattr__(name: str) -> Any:
    from pipecat_harness.stores import lazy_attribute

    return lazy_attribute(__name__, {"RedisStateStore": "redis_store"}, name, "redis")
