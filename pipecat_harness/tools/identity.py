"""What makes two write requests one logical operation, and the key that names it.

An operation is the tenant, call, tool and canonical request, plus what makes an identical request new, per tool:
``"call"`` (the default: refunding $45 on #W2378156 twice in one call is one refund, whether from a duplicate, a
retry, a later turn or a restart), ``"turn"`` (asking again in a later turn means doing it again, as for
``resend_verification_code``), or a function of the arguments returning a discriminator. The key never includes an
attempt counter or a process id, so a backend deduping by key (as Stripe does) applies the operation once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["OperationIdentity", "OperationScope", "operation_key", "operation_scope"]

OperationScope = Literal["call", "turn"] | Callable[[Mapping[str, Any]], str]
"""What makes an identical request a new operation: nothing in the call, a new turn, or a discriminator."""


@dataclass(frozen=True)
class OperationIdentity:
    """The parts that name one logical operation; ``resource`` (what the write changes) is not part of the key."""

    tenant: str
    call_id: str
    tool: str
    request_hash: str
    occurrence: str = ""
    resource: str = ""
    key: str = field(init=False, repr=False, compare=False)
    """The idempotency key (see :func:`operation_key`), computed once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", operation_key(self))

    @property
    def scope(self) -> str:
        """``<call id>:<tool>:<request hash>``: what the ledger groups by call."""
        return f"{self.call_id}:{self.tool}:{self.request_hash}"


def operation_key(identity: OperationIdentity) -> str:
    """Return ``<call id>:<tool>:<digest>`` (about 200 characters at most: within what backends accept for keys)."""
    parts = (identity.tenant, identity.call_id, identity.tool, identity.request_hash, identity.occurrence)
    digest = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{identity.call_id[:96]}:{identity.tool[:64]}:{digest}"


def operation_scope(scope: OperationScope, arguments: Mapping[str, Any], turn_id: int) -> str:
    """Return the occurrence part of a request's identity (``ValueError`` for a scope of none of the three kinds)."""
    if scope == "call":
        return ""
    if scope == "turn":
        return f"turn {turn_id}"
    if callable(scope):
        return str(scope(arguments))
    raise ValueError(f"operation scope must be 'call', 'turn' or a function of the arguments, not {scope!r}")
