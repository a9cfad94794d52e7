"""Who runs an operation's handler, and whether that runner can still be running it.

A gate that starts a handler writes its owner token and a lease (the latest
moment the handler can still be running: deadline plus late-reply window) on
the operation record. Nobody else starts the same operation while the lease
holds. A gate's token stays live until the last of its handlers has returned
(a handler in a thread included). When the owner is provably gone

* a token of this process whose gate stopped and whose handlers all returned;
* a token of another process on this host whose pid no longer exists (SIGKILL,
  crash) — checked with ``kill(pid, 0)``,

its lease still runs ``grace_secs`` (the request's timeout) past the moment
the death was first seen, so a request it had on the wire has had its time to
land. Owners on other hosts are trusted until their lease runs out. Leases
keep work from running twice side by side; fencing
(:attr:`~pipecat_harness.tools.operation_state.OperationRecord.fencing_key`)
is what keeps a late request from applying after its attempt was voided, so
a skewed clock or a paused owner costs time, never a second application.
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


def handler_may_run(record: OperationRecord, now: float, grace_secs: float = 0.0) -> bool:
    """Whether the record's handler may still be running or its request still land.

    The lease must hold, and the owner be alive or gone for less than ``grace_secs``.
    """
    if record.lease_until <= now:
        return False
    if not owner_gone(record.owner):
        return True
    if len(_GONE_SINCE) > 4096:
        _GONE_SINCE.clear()
    return now < _GONE_SINCE.setdefault(record.owner, now) + grace_secs
