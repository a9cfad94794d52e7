"""Who runs an operation's handler, and whether that runner can still be running it.

A gate that starts a handler writes its owner token and a lease (the latest
moment the handler can still be running: deadline plus late-reply window) on
the operation record. Nobody else settles the record as ``failed`` while the
lease holds, because the handler may yet apply the write. The lease ends early
when the owner is provably gone:

* a token of this process whose gate was closed (its handlers were cancelled);
* a token of another process on this host whose pid no longer exists (SIGKILL,
  crash) — checked with ``kill(pid, 0)``.

Owners on other hosts are trusted until their lease runs out.
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


def new_owner() -> OwnerToken:
    """Return a fresh owner token for a gate of this process (alive until :func:`release_owner`)."""
    token = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    _LIVE.add(token)
    return token


def release_owner(token: OwnerToken) -> None:
    """Mark a token of this process as gone (its gate stopped all its handlers)."""
    _LIVE.discard(token)


def owner_gone(token: OwnerToken) -> bool:
    """Whether the owner is provably no longer running any handler.

    ``False`` means "may still be running": an owner on another host, or a
    token that cannot be read.
    """
    host, _, rest = token.partition(":")
    pid_text, _, _ = rest.partition(":")
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


def handler_may_run(record: OperationRecord, now: float) -> bool:
    """Whether the record's handler may still be running (its lease holds and its owner is not gone)."""
    return record.lease_until > now and not owner_gone(record.owner)
