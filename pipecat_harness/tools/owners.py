"""Who runs an operation's handler, and whether that runner can still be running it.

A gate starting a handler writes its owner token and a lease (deadline plus late-reply window) on the record. A
provably gone owner (this process's, stopped with no handler left, or a dead pid on this host) still gets
``grace_secs`` from when its death was seen, for a request on the wire to land; other hosts' owners are trusted
until their lease ends. Leases keep work from running twice side by side; fencing keeps a late request from applying.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipecat_harness.tools.operation_state import OperationRecord

__all__ = ["OwnerToken", "handler_may_run", "new_owner", "owner_gone", "release_owner"]

OwnerToken = str
"""``<host>:<pid>:<random>``, unique per gate instance."""

_HOST = socket.gethostname().replace(":", "_")[:64]
_LIVE: set[str] = set()
_GONE_SINCE: dict[str, float] = {}


def new_owner() -> OwnerToken:
    """Return a fresh owner token for a gate of this process (alive until :func:`release_owner`)."""
    token = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    _LIVE.add(token)
    return token


def release_owner(token: OwnerToken) -> None:
    """Mark a token of this process as gone (its gate stopped all its handlers)."""
    _LIVE.discard(token)


def owner_gone(token: OwnerToken) -> bool:
    """Whether the owner is provably no longer running any handler (an unreadable or remote token may be)."""
    host, _, rest = token.partition(":")
    pid_text = rest.partition(":")[0]
    if not token or host != _HOST or not pid_text.isdigit():
        return not token
    pid = int(pid_text)
    if pid == os.getpid():
        return token not in _LIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a live process of another user
        return False
    return False


def handler_may_run(record: OperationRecord, now: float, grace_secs: float = 0.0) -> bool:
    """Whether the handler may still run or its request land: lease held, owner alive or gone < ``grace_secs``."""
    if record.lease_until <= now:
        return False
    if not owner_gone(record.owner):
        return True
    if len(_GONE_SINCE) > 4096:
        _GONE_SINCE.clear()
    return now < _GONE_SINCE.setdefault(record.owner, now) + grace_secs
