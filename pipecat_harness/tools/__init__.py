"""Tool controls: decide which tool calls are forwarded, and record every write as an operation.

* :class:`ToolGate` (framework-free): suppress identical writes within a turn, validate arguments, attach server
  context, run policy rules, turn timeouts into ``outcome_unknown``.
* :class:`OperationLedger`: idempotent operation records with an exact state machine, compare-and-set versions, and an
  outbox written in the same transaction (SQLite or PostgreSQL, each on its own driver; see ``ledger_store``).
* :class:`OutboxPublisher` / :class:`OutboxConsumer`: at-least-once delivery, dedupe by event id.
* ``pipecat_harness.tools.control.ToolGateControl``: the Pipecat integration (imported on demand).
"""

from typing import Any

from pipecat_harness.tools.arguments import ArgumentAccumulator, ArgumentError, attach_server_context, parse_arguments
from pipecat_harness.tools.canonical import CanonicalizationError, canonical_json, request_hash
from pipecat_harness.tools.execution import current_operation, reports_error
from pipecat_harness.tools.gate import DecisionSink, GateHandler, ToolGate
from pipecat_harness.tools.operation_state import (
    ConcurrentUpdate,
    IdempotencyConflict,
    InvalidTransition,
    LedgerError,
    OperationRecord,
    OperationRefused,
    OperationStatus,
    Reconciler,
    Reconciliation,
)
from pipecat_harness.tools.policy import PolicyRule, PolicySet, PolicyVerdict, ToolRequest
from pipecat_harness.tools.result import ALREADY_DONE, GateResult, GateStatus
from pipecat_harness.tools.schema import schema_of, validate_arguments

__all__ = ["ALREADY_DONE", "ArgumentAccumulator", "ArgumentError", "CanonicalizationError", "ConcurrentUpdate",
           "DecisionSink", "GateHandler", "GateResult", "GateStatus", "IdempotencyConflict", "InvalidTransition",
           "LedgerError", "OperationLedger", "OperationRecord", "OperationRefused", "OperationStatus", "OutboxConsumer",
           "OutboxEvent", "OutboxPublisher", "PolicyRule", "PolicySet", "PolicyVerdict", "Reconciler", "Reconciliation",
           "ToolGate", "ToolRequest", "attach_server_context", "canonical_json", "current_operation", "parse_arguments",
           "reports_error", "request_hash", "schema_of", "validate_arguments"]

#: Names from the store layer (the ``sqlite`` extra: SQLAlchemy), imported when first used.
_STORE_NAMES = {"OperationLedger": "ledger", "OutboxConsumer": "outbox", "OutboxEvent": "outbox",
                "OutboxPublisher": "outbox"}


def __getattr__(name: str) -> Any:
    from pipecat_harness.stores import lazy_attribute

    return lazy_attribute(__name__, _STORE_NAMES, name, "sqlite")
