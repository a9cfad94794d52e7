"""Alert payloads as on-call channels' incoming webhooks want them (Slack, Microsoft Teams, PagerDuty), links kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["FORMATTERS", "Formatter", "pagerduty_event", "slack_message", "teams_message"]

Formatter = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the design's payload into a channel's webhook body."""

#: The console links every channel's message carries, with their titles (PagerDuty takes the first two).
_LINKS = (("operator_console", "Open in console"), ("transcript", "Transcript"), ("audio", "Audio"))
_PAGERDUTY_SEVERITY = {"critical": "critical", "warn": "warning", "info": "info"}


def _summary(payload: dict[str, Any]) -> str:
    return (f"[{payload['severity']}] {payload['category']} claim {payload['verdict']} on call {payload['call_id']} "
            f"({payload['tenant_id']}): {payload['claim']}")


def _refs(payload: dict[str, Any]) -> str:
    return ", ".join(payload.get("constraint_ref") or []) or "none"


def _facts(payload: dict[str, Any]) -> dict[str, str]:
    return {"Severity": payload["severity"], "Tenant": payload["tenant_id"],
            "Call": f"{payload['call_id']} ({payload['turn_id']})",
            "Constraint": f"{_refs(payload)} (list {payload['constraint_list_version']})",
            "Confidence": f"{payload['confidence']:.2f}", "Recommended": payload["recommended_action"]}


def slack_message(payload: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook message (Block Kit) for an alert."""
    caller = f"> *Caller:* {payload['caller_utterance']}\n" if payload.get("caller_utterance") else ""
    quote = f"{caller}> *Agent:* {payload['agent_utterance']}"
    facts = _facts(payload)
    fields = [{"type": "mrkdwn", "text": f"*{k}:* {facts[k]}"} for k in ("Severity", "Tenant", "Call", "Confidence")]
    evidence = f"*Rationale:* {payload['rationale']}\n*Constraint:* `{_refs(payload)}` "
    evidence += f"(list {payload['constraint_list_version']})\n*Recommended:* {payload['recommended_action']}"
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": t}, "url": payload["links"][k]}
               for k, t in _LINKS]
    header = {"type": "header", "text": {"type": "plain_text", "text": f"Grader flag: {payload['category']}"}}
    said = [{"type": "section", "text": {"type": "mrkdwn", "text": text}} for text in (quote, evidence)]
    return {"text": _summary(payload), "blocks": [header, {"type": "section", "fields": fields}, *said,
                                                  {"type": "actions", "elements": buttons}]}


def teams_message(payload: dict[str, Any]) -> dict[str, Any]:
    """A Microsoft Teams incoming-webhook message carrying an Adaptive Card."""
    title = {"type": "TextBlock", "size": "Medium", "weight": "Bolder", "text": f"Grader flag: {payload['category']}"}
    facts = {"type": "FactSet", "facts": [{"title": k, "value": v} for k, v in _facts(payload).items()]}
    caller = [f"Caller: {payload['caller_utterance']}"] if payload.get("caller_utterance") else []
    texts = [*caller, f"Agent: {payload['agent_utterance']}", f"Rationale: {payload['rationale']}"]
    card = {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
            "body": [title, facts, *({"type": "TextBlock", "wrap": True, "text": text} for text in texts)],
            "actions": [{"type": "Action.OpenUrl", "title": t, "url": payload["links"][k]} for k, t in _LINKS]}
    return {"type": "message",
            "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}]}


def pagerduty_event(payload: dict[str, Any], routing_key: str = "") -> dict[str, Any]:
    """A PagerDuty Events API v2 ``trigger`` (deduplicated on the audit row)."""
    details = {"summary": _summary(payload)[:1024], "source": payload["tenant_id"],
               "severity": _PAGERDUTY_SEVERITY.get(payload["severity"], "warning"), "component": "hallucination_grader",
               "group": payload["call_id"], "class": payload["category"], "custom_details": payload}
    return {"routing_key": routing_key, "event_action": "trigger",
            "dedup_key": f"{payload['tenant_id']}:{payload['audit_row_ref']}", "payload": details,
            "links": [{"href": payload["links"][key], "text": title} for key, title in _LINKS[:2]]}


#: Formatter by the ``grader.webhook_format`` name (``harness`` sends the design's payload as is).
FORMATTERS: dict[str, Formatter] = {"harness": lambda p: p, "slack": slack_message, "teams": teams_message,
                                    "pagerduty": pagerduty_event}
