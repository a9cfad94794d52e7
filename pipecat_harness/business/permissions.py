"""Permissions tied to the customer the server verified: account writes only on records that customer owns.

Reads are never blocked. A write on an account needs a **verified customer** (a configured verification tool returned
a record matching what was asked; the customer is that record's id, never a model argument, and the first one stays
the call's) and **ownership** (a trusted result of this call showed each record the write names to belong to that
customer). A record of unknown owner is held until looked up; another customer's is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest

__all__ = ["CustomerVerification", "identity_rule"]


def identity_rule(verified: Callable[[], bool], tools: Iterable[str], *, name: str = "identity_verified") -> PolicyRule:
    """A gate rule ``name`` holding the writes in ``tools`` until ``verified()`` (identity only, no ownership)."""

    def check(request: ToolRequest) -> PolicyVerdict | None:
        return None if verified() else _verify_first(request)

    return PolicyRule(name, check, tools=frozenset(tools))


def _verify_first(request: ToolRequest) -> PolicyVerdict:
    first = "verify the caller's identity first (look them up by email, or by name and zip code)"
    return PolicyVerdict("clarify", f"{request.name} changes the caller's account: {first}")


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and str(a).strip().casefold() == str(b).strip().casefold()


def _failed(result: Any) -> bool:
    if not isinstance(result, Mapping):
        return True
    return bool(result.get("error")) or str(result.get("status", "ok")) in {"failed", "not_found", "error", "blocked"}


class CustomerVerification:
    """The call's verified customer and the owners of the records trusted results showed.

    Args:
        steps: Per verification tool, the request fields its returned record must match.
        customer_field: The record field naming the customer (``user_id``).
        owner_field: The field of a business record naming its owner (an order's ``user_id``).
        record_fields: Argument names that name an owned record (``order_id``).
        owned_lists: Fields of a customer's profile listing the records they own (``orders``).
        normalize: Canonical form of a record id for comparison (default: upper case, no ``#``).
    """

    def __init__(self, steps: Mapping[str, Sequence[str]], *, customer_field: str = "user_id",
                 owner_field: str = "user_id", record_fields: Sequence[str] = ("order_id",),
                 owned_lists: Mapping[str, str] | None = None,
                 normalize: Callable[[str, Any], str] | None = None) -> None:
        self.steps = {tool: tuple(fields) for tool, fields in steps.items()}
        self.customer_field = customer_field
        self.owner_field = owner_field
        self.record_fields = tuple(record_fields)
        self.owned_lists = dict(owned_lists or {"orders": "order_id"})
        self._normalize = normalize or (lambda _field, value: str(value).strip().upper().lstrip("#"))
        self.customer: str | None = None
        self.owners: dict[tuple[str, str], str] = {}
        self.refused: list[str] = []

    def observe(self, tool: str, arguments: Mapping[str, Any], result: Any) -> str | None:
        """Learn from one trusted tool result; returns the customer it verified, if it verified one now."""
        if _failed(result):
            return None
        assert isinstance(result, Mapping)
        self._learn_owners(result)
        if tool not in self.steps:
            return None
        record_customer = result.get(self.customer_field)
        if not record_customer:
            self.refused.append(f"{tool}: the record names no {self.customer_field}")
            return None
        mismatched = [f for f in self.steps[tool] if not _same(result.get(f), arguments.get(f))]
        if mismatched:
            self.refused.append(f"{tool}: the returned record does not match the request on {', '.join(mismatched)}")
            return None
        if self.customer is not None and self.customer != str(record_customer):
            self.refused.append(f"{tool}: {record_customer} not taken; the call's verified customer is {self.customer}")
            return None
        newly = self.customer is None
        self.customer = str(record_customer)
        return self.customer if newly else None

    def _learn_owners(self, result: Mapping[str, Any]) -> None:
        owner = result.get(self.owner_field)
        if not owner:
            return
        listed = [(name, record.get(name) if isinstance(record, Mapping) else record)
                  for list_field, name in self.owned_lists.items() for record in result.get(list_field) or []]
        for name, value in [(name, result.get(name)) for name in self.record_fields] + listed:
            if value:
                self.owners[(name, self._normalize(name, value))] = str(owner)

    def owner_of(self, field: str, value: Any) -> str | None:
        """Who a trusted result showed owns record ``value`` of ``field`` (``None``: not shown yet)."""
        return self.owners.get((field, self._normalize(field, value)))

    def check(self, request: ToolRequest) -> PolicyVerdict | None:
        """Hold a write until a customer is verified; refuse one on a record they do not own."""
        if self.customer is None:
            return _verify_first(request)
        for name in self.record_fields:
            if name not in request.arguments:
                continue
            value = request.arguments[name]
            owner = self.owner_of(name, value)
            if owner is None:
                reason = f"look up {name} {value} first; this call has not seen who owns it"
                return PolicyVerdict("clarify", f"{request.name}: {reason}")
            if owner != self.customer:
                reason = f"{name} {value} does not belong to the verified customer; it cannot be changed on this call"
                return PolicyVerdict("block", f"{request.name}: {reason}")
        return None

    def rule(self, tools: Iterable[str], *, name: str = "verified_customer") -> PolicyRule:
        """The gate rule for the writes in ``tools``."""
        return PolicyRule(name, self.check, tools=frozenset(tools))
