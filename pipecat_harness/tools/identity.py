"""What makes two write requests one logical operation, and the key that names it.

A logical operation is identified by the tenant, the call, the tool, the
canonical request (arguments in their business-canonical form, server context
included) and, per tool, what makes a second identical request a genuinely new
operation:

* ``"call"`` (the default, and every bundled retail write): an identical
  request is the same operation for the whole call. Refunding $45 on order
  #W2378156 "for a damaged item" twice in one call is one refund, whether the
  repeat comes from a duplicate in one reply, a retry, a later turn, or a
  restarted process.
* ``"turn"``: an identical request in a later user turn is a new operation
  (a tool such as ``resend_verification_code``, where the caller asking
  again means doing it again). Repeats within a turn are still one operation.
* a function of the arguments returning a discriminator: the request itself
  says what distinguishes occurrences (a client-chosen ``occurrence`` field,
  a date the caller named).

The key (:func:`operation_key`) is derived from those parts only, never from
an attempt counter, a turn number of a ``"call"`` tool, or a process id: every
attempt, turn and process computes the same key for the same intent, and a
backend that dedupes by key (as Stripe does) applies it once.
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
    """The parts that name one logical operation.

    Parameters:
        tenant: The tenant.
        call_id: The call (the gate's session id).
        tool: The tool name.
        request_hash: Hash of the canonical request (:func:`request_hash`).
        occurrence: What makes this a new operation despite an identical
            request (the turn for ``"turn"`` tools, a discriminator, or empty).
        resource: What the write changes (not part of the key): a different
            write on the same resource waits while this one is unsettled.
    """

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
    """Return the idempotency key of a logical operation.

    ``<call id>:<tool>:<digest>``, where the digest covers tenant, call, tool,
    canonical request and occurrence; at most about 200 characters for call ids
    and tool names of ordinary length, within the limits backends put on keys.
    """
    material = "\n".join((identity.tenant, identity.call_id, identity.tool, identity.request_hash,
                          identity.occurrence))
    digest = hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{identity.call_id[:96]}:{identity.tool[:64]}:{digest}"


def operation_scope(scope: OperationScope, arguments: Mapping[str, Any], turn_id: int) -> str:
    """Return the occurrence part of a request's identity under a tool's scope.

    Raises:
        ValueError: ``scope`` is not ``"call"``, ``"turn"`` or a callable.
    """
    if scope == "call":
        return ""
    if scope == "turn":
        return f"turn {turn_id}"
    if callable(scope):
        return str(scope(arguments))
    raise ValueError(f"operation scope must be 'call', 'turn' or a function of the arguments, not {scope!r}")
