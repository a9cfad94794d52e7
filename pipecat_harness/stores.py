"""The durable stores a setting names, each opened by kind: the one place the core reaches the store layer.

Core modules type their collaborators on protocols they define (``Operations`` and ``OperationStore`` in
:mod:`pipecat_harness.tools.operations`, :class:`~pipecat_harness.state.store.StateStore`,
:class:`~pipecat_harness.grader.audit_row.AuditSink`, :class:`~pipecat_harness.retrieval.evidence.EvidenceSource`,
:class:`~pipecat_harness.business.proposal.ProposalStore`). The implementations (SQLAlchemy, asyncpg, Redis,
onnxruntime) sit in the store layer and are named in :data:`STORES` by import path, imported when a setting asks
for one, so no core module imports them (the ``core-stores`` contract) and a missing extra is one sentence.
"""

from __future__ import annotations

import sys
from typing import Any

from pipecat_harness.errors import import_or_name_extra, require_extra

__all__ = ["STORES", "lazy_attribute", "open_store", "store_factory"]

#: Store kind -> (``"module:factory"``, the extra that installs it, the library of that extra it needs).
STORES: dict[str, tuple[str, str, str]] = {
    "operation_ledger": ("pipecat_harness.tools.ledger:OperationLedger", "sqlite", "sqlalchemy"),
    "redis_state": ("pipecat_harness.state.redis_store:RedisStateStore", "redis", "redis"),
    "sql_proposals": ("pipecat_harness.state.proposals:SqlProposals", "sqlite", "sqlalchemy"),
    "audit": ("pipecat_harness.grader.audit:AuditStore", "sqlite", "sqlalchemy"),
    "alert_outbox": ("pipecat_harness.grader.alert_outbox:OutboxAlerter", "sqlite", "sqlalchemy"),
    "file_retriever": ("pipecat_harness.retrieval.prepared:build_file_retriever", "retrieval", "sqlalchemy"),
}


def store_factory(kind: str, setting: str) -> Any:
    """The class or function that builds store ``kind``; ``setting`` names what asked, for the error.

    Raises:
        UsageError: The extra that provides the store is not installed.
    """
    path, extra, library = STORES[kind]
    require_extra(setting, library, extra)
    module, _, factory = path.partition(":")
    return getattr(import_or_name_extra(module, setting, extra), factory)


def open_store(kind: str, setting: str, /, *args: Any, **kwargs: Any) -> Any:
    """Build store ``kind`` from the arguments (see :func:`store_factory`)."""
    return store_factory(kind, setting)(*args, **kwargs)


def lazy_attribute(package: str, modules: dict[str, str], name: str, extra: str) -> Any:
    """A package's ``__getattr__``: ``name`` from its module in ``modules`` (relative to ``package``), kept once read.

    Raises:
        AttributeError: ``name`` is not one of the package's lazy names.
        UsageError: ``extra``, which provides the module, is not installed.
    """
    module = modules.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_or_name_extra(f"{package}.{module}", f"{package}.{name}", extra), name)
    setattr(sys.modules[package], name, value)
    return value
