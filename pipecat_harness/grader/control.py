"""``GraderControl``: plugs the per-turn grader into a harness as a read-only observer."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pipecat.observers.base_observer import BaseObserver

from pipecat_harness.config import ConfigError, GraderSettings
from pipecat_harness.control import HarnessControl
from pipecat_harness.events import GateDecided
from pipecat_harness.grader.actions import OperationLedgerView
from pipecat_harness.grader.alert_formats import FORMATTERS, pagerduty_event
from pipecat_harness.grader.alerts import Alerter, SeverityPolicy
from pipecat_harness.grader.audit_row import AuditSink
from pipecat_harness.grader.constraints import ConstraintError, ConstraintList
from pipecat_harness.grader.llm_grader import CombinedGrader, LLMGrader
from pipecat_harness.grader.observer import TurnGrader
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import Grader
from pipecat_harness.stores import open_store

if TYPE_CHECKING:
    from pipecat_harness.control import ControlHost

__all__ = ["GraderControl", "build_grader"]


def _alerter(settings: GraderSettings) -> Alerter | None:
    """The webhook alerter the settings ask for: an outbox in ``alert_outbox_url``, else in the audit database."""
    if not settings.webhook_url:
        return None
    if not settings.webhook_secret:
        raise ConfigError("grader: webhook_url is set but webhook_secret is empty "
                          "(set grader.webhook_secret or PIPECAT_HARNESS_GRADER__WEBHOOK_SECRET)")
    formatter = FORMATTERS[settings.webhook_format]
    if settings.webhook_format == "pagerduty":
        if not settings.pagerduty_routing_key:
            raise ConfigError("grader: webhook_format is pagerduty but pagerduty_routing_key is empty")
        formatter = functools.partial(pagerduty_event, routing_key=settings.pagerduty_routing_key)
    alerter: Alerter = open_store(
        "alert_outbox", "grader.webhook_url", settings.alert_outbox_url or settings.audit_url, settings.webhook_url,
        settings.webhook_secret, formatter=formatter, max_attempts=settings.webhook_max_attempts,
        retry_delay_secs=settings.webhook_backoff_secs)
    return alerter


def build_grader(settings: GraderSettings, constraints: ConstraintList,
                 ledger: OperationLedgerView | None = None) -> Grader:
    """Build the grader the settings ask for (``rules``, ``llm`` or ``combined``)."""
    rules = RuleGrader(constraints, ledger)
    if settings.mode == "rules":
        return rules
    llm = LLMGrader(constraints, model=settings.llm_model)
    return llm if settings.mode == "llm" else CombinedGrader(rules, llm)


class GraderControl(HarnessControl):
    """Grades every committed assistant turn of the call against the tenant's constraint list.

    Action claims go to the tool gate's ledger when it keeps one, else to the operations seen to succeed on the call.
    """

    name = "grader"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        settings = harness.config.grader
        if not settings.constraints_path:
            raise ConfigError("grader.constraints_path is not set; set it to the tenant's constraint list "
                              "(a YAML/JSON file, or a bundled one such as bundled:retail)")
        try:
            self.constraints = ConstraintList.load(settings.constraints_path)
        except ConstraintError as exc:
            raise ConfigError(f"grader: {exc}") from exc
        self.grader = build_grader(settings, self.constraints)
        self.audit: AuditSink = open_store("audit", "grader.audit_url", settings.audit_url)
        self.alerter = _alerter(settings)
        self.turn_grader = TurnGrader(
            self.grader, audit=self.audit, tenant=settings.tenant or self.constraints.tenant, call_id=harness.call_id,
            constraints_version=self.constraints.version_id,
            severity=SeverityPolicy(frozenset(settings.critical_categories), settings.alert_min_severity),
            alerter=self.alerter, console_url=settings.console_url, queue_size=settings.queue_size,
            decisions=harness.decisions, close_resources=True)
        self._gate_ledger: OperationLedgerView | None = None
        harness.events.subscribe(GateDecided, self._on_gate)

    def _on_gate(self, event: GateDecided) -> None:
        decision, evidence = event.decision, event.decision.evidence or {}
        if (decision.action == "reconciled" and not event.outcome and evidence.get("status") == "succeeded"
                and evidence.get("tool")):
            self.turn_grader.executed.record(self.harness.call_id, str(evidence["tool"]))

    def bind_gate(self, gate: HarnessControl) -> None:
        """Check action claims against the tool gate's ledger, when it keeps one."""
        if isinstance(ledger := getattr(gate, "ledger", None), OperationLedgerView):
            self._gate_ledger = ledger

    def observers(self) -> list[BaseObserver]:
        """The turn grader (connected to the tool ledger, now that every control is built)."""
        rules = self.grader.rules if isinstance(self.grader, CombinedGrader) else self.grader
        if isinstance(rules, RuleGrader) and rules.ledger is None:
            rules.ledger = self._gate_ledger or self.turn_grader.executed
        return [self.turn_grader]
