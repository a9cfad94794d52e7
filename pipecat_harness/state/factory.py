"""Build a :class:`StateStore` from a backend name."""

from __future__ import annotations

from typing import cast

from pipecat_harness.state.memory import MemoryStateStore
from pipecat_harness.state.store import StateStore
from pipecat_harness.stores import open_store

__all__ = ["create_store"]


def create_store(backend: str = "memory", *, redis_url: str = "redis://127.0.0.1:6379/0", prefix: str = "",
                 memory_max_keys: int = 20_000) -> StateStore:
    """A ``"memory"`` store (at most ``memory_max_keys`` keys) or a ``"redis"`` one; ``ValueError`` for others."""
    if backend == "memory":
        return MemoryStateStore(max_keys=memory_max_keys)
    if backend == "redis":
        return cast(StateStore, open_store("redis_state", "state backend 'redis'", redis_url,
                                           prefix=prefix or "pipecat-harness:"))
    raise ValueError(f"unknown state backend {backend!r}; choose 'memory' or 'redis'")
