"""Per-turn grader: check every agent utterance against the tenant's facts, audit it, alert on it.

:class:`RuleGrader` (offline default), :class:`LLMGrader` and :class:`CombinedGrader` grade against a
:class:`ConstraintList`; :class:`TurnGrader` is the Pipecat observer; :class:`AuditStore` (the ``sqlite`` extra) is
imported on first use, ``pipecat_harness.grader.control.GraderControl`` on demand.
"""

from typing import Any

from pipecat_harness.grader.actions import InMemoryOperations, OperationLedgerView, SucceededOperation
from pipecat_harness.grader.alerts import SeverityPolicy, WebhookAlerter, alert_payload, sign, verify_signature
from pipecat_harness.grader.audit_row import AuditRow
from pipecat_harness.grader.calibration import CalibrationReport, LabeledSet, evaluate
from pipecat_harness.grader.constraints import ConstraintError, ConstraintList, ConstraintStore, policy_statement
from pipecat_harness.grader.llm_grader import CombinedGrader, LLMGrader
from pipecat_harness.grader.observer import TurnGrader
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import Grader, Verdict

__all__ = ["AuditRow", "AuditStore", "CalibrationReport", "CombinedGrader", "ConstraintError", "ConstraintList",
           "ConstraintStore", "Grader", "InMemoryOperations", "LLMGrader", "LabeledSet", "OperationLedgerView",
           "RuleGrader", "SeverityPolicy", "SucceededOperation", "TurnGrader", "Verdict", "WebhookAlerter",
           "alert_payload", "evaluate", "policy_statement", "sign", "verify_signature"]


def __getattr__(name: str) -> Any:
    from pipecat_harness.stores import lazy_attribute

    return lazy_attribute(__name__, {"AuditStore": "audit"}, name, "sqlite")
