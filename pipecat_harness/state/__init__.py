"""Per-call shared state: store interface, memory and Redis backends, lock and debounce."""

from pipecat_harness.state.coordination import CallLock, LockTimeout, TranscriptDebouncer
from pipecat_harness.state.factory import create_store
from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.redis_store import RedisStateStore
from pipecat_harness.state.store import StateStore, StoreError

__all__ = [
    "CallLock",
    "LockTimeout",
    "MemoryStateStore",
    "RedisStateStore",
    "StateStore",
    "StoreError",
    "TranscriptDebouncer",
    "create_store",
]
