import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from pipecat_harness.grader.alert_formats import FORMATTERS, pagerduty_event, slack_message, teams_message
from pipecat_harness.grader.alerts import (
    PAYLOAD_FIELDS,
    SIGNATURE_HEADER,
    SeverityPolicy,
    WebhookAlerter,
    alert_payload,
    sign,
    verify_signature,
)
from pipecat_harness.grader.audit import AuditRow

SECRET = "s3cret"


@dataclass
class Receiver:
    """A loopback webhook endpoint that fails the first ``fail_first`` requests."""

    fail_first: int = 0
    delay_secs: float = 0.0
    bodies: list[dict] = field(default_factory=list)
    signatures_ok: list[bool] = field(default_factory=list)
    hits: int = 0
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        body = await request.read()
        if self.delay_secs:
            await asyncio.sleep(self.delay_secs)
        if self.hits <= self.fail_first:
            return web.Response(status=503)
        self.signatures_ok.append(verify_signature(SECRET, body, request.headers.get(SIGNATURE_HEADER, "")))
        self.bodies.append(json.loads(body))
        return web.Response(status=204)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    state = Receiver()
    app = web.Application()
    app.router.add_post("/hook", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield state
    finally:
        await runner.cleanup()


def flagged_row() -> AuditRow:
    return AuditRow(tenant="acme", call_id="call-1", turn_id=2, utterance="The basic detail is $129.",
                    caller_utterance="How much?", verdict="unsupported", category="price",
                    claim="The basic detail is $129.", constraint_ref="px_basic",
                    rationale="quoted $129 but basic detail is listed at $149", confidence=0.95,
                    grader_model="rules", constraints_version="v1", severity="critical", id=7)


def test_severity_mapping_is_configurable() -> None:
    default = SeverityPolicy()
    assert [default.severity("unsupported", c) for c in ("price", "policy", "action", "hours", "capability")] == [
        "critical", "critical", "critical", "warning", "warning"]
    assert default.severity("llm_flagged", "price") == "warning"
    assert default.severity("supported", "price") == "info"
    assert default.should_alert("critical") and not default.should_alert("warning")
    strict = SeverityPolicy(frozenset({"hours"}), alert_min_severity="warning")
    assert strict.severity("unsupported", "hours") == "critical" and strict.should_alert("warning")


def test_payload_matches_the_designs_shape_field_for_field() -> None:
    row = flagged_row()
    row = AuditRow(**{**row.to_dict(), "call_id": "call_9b1e", "turn_id": 4,
                      "constraint_ref": "px_basic,policies.refund", "constraints_version": "sparkle_v3"})
    payload = alert_payload(row, console_url="https://console.example/")
    assert list(payload) == [
        "event", "severity", "tenant_id", "call_id", "turn_id", "verdict", "category", "claim", "agent_utterance",
        "caller_utterance", "constraint_ref", "rationale", "confidence", "grader_model", "constraint_list_version",
        "audit_row_ref", "links", "recommended_action"]
    assert list(payload) == list(PAYLOAD_FIELDS)
    assert payload["event"] == "hallucination_grader.flag"
    assert payload["severity"] in {"info", "warn", "critical"} and payload["severity"] == "critical"
    assert (payload["tenant_id"], payload["call_id"], payload["turn_id"]) == ("acme", "call_9b1e", "turn_9b1e_004")
    assert payload["constraint_ref"] == ["px_basic", "policies.refund"]
    assert payload["constraint_list_version"] == "sparkle_v3" and payload["audit_row_ref"] == "audit_7"
    assert payload["links"] == {
        "operator_console": "https://console.example/t/acme/calls/call_9b1e#turn_004",
        "transcript": "https://console.example/t/acme/calls/call_9b1e/transcript",
        "audio": "https://console.example/t/acme/calls/call_9b1e/audio",
    }
    assert isinstance(payload["confidence"], float) and isinstance(payload["recommended_action"], str)
    assert alert_payload(AuditRow(**{**row.to_dict(), "severity": "warning"}))["severity"] == "warn"
    json.dumps(payload)  # the wire format is plain JSON


def test_signature() -> None:
    body = json.dumps(alert_payload(flagged_row())).encode()
    header = sign(SECRET, body)
    assert verify_signature(SECRET, body, header)
    assert not verify_signature("other", body, header)
    assert not verify_signature(SECRET, body + b" ", header)
    assert not verify_signature(SECRET, body, sign(SECRET, body, timestamp=1))
    assert not verify_signature(SECRET, body, "garbage")


def test_channel_formatters_carry_the_evidence_and_the_links() -> None:
    payload = alert_payload(flagged_row(), console_url="https://console.example")
    console = payload["links"]["operator_console"]
    slack = slack_message(payload)
    slack_text = json.dumps(slack)
    assert slack["text"].startswith("[critical] price claim unsupported")
    assert payload["agent_utterance"] in slack_text and payload["rationale"] in slack_text and console in slack_text
    teams = teams_message(payload)
    card = teams["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["content"]["type"] == "AdaptiveCard" and card["content"]["actions"][0]["url"] == console
    event = pagerduty_event(payload, routing_key="R0UT1NG")
    assert (event["routing_key"], event["event_action"]) == ("R0UT1NG", "trigger")
    assert event["dedup_key"] == "acme:audit_7" and event["payload"]["severity"] == "critical"
    assert event["payload"]["custom_details"] == payload and event["links"][0]["href"] == console
    warn = pagerduty_event({**payload, "severity": "warn"})
    assert warn["payload"]["severity"] == "warning"
    assert set(FORMATTERS) == {"harness", "slack", "teams", "pagerduty"}


async def test_formatted_bodies_are_signed_like_the_payload(receiver: Receiver) -> None:
    alerter = WebhookAlerter(receiver.url, SECRET, backoff_secs=0.01, formatter=slack_message)
    assert await alerter.dispatch(alert_payload(flagged_row()))
    await alerter.drain(10)
    await alerter.close()
    assert receiver.signatures_ok == [True] and "blocks" in receiver.bodies[0]


async def test_signed_delivery_with_retries(receiver: Receiver) -> None:
    receiver.fail_first = 2
    alerter = WebhookAlerter(receiver.url, SECRET, max_attempts=4, backoff_secs=0.01)
    assert alerter.send(alert_payload(flagged_row()))
    await alerter.drain(10)
    await alerter.close()
    assert receiver.hits == 3 and receiver.signatures_ok == [True]
    assert receiver.bodies[0]["claim"] == "The basic detail is $129."
    assert len(alerter.stats.delivered) == 1 and alerter.stats.attempts == 3


async def test_endpoint_down_gives_up_without_blocking_the_sender() -> None:
    alerter = WebhookAlerter("http://127.0.0.1:9/hook", SECRET, max_attempts=3, backoff_secs=0.01, timeout_secs=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert alerter.send(alert_payload(flagged_row()))
    assert loop.time() - started < 0.05  # queued, not sent inline
    await alerter.drain(10)
    await alerter.close()
    assert alerter.stats.delivered == [] and len(alerter.stats.failed) == 1
    assert alerter.stats.attempts == 3


async def test_slow_endpoint_times_out_and_a_full_queue_drops_with_a_count(receiver: Receiver) -> None:
    receiver.delay_secs = 1.0
    alerter = WebhookAlerter(receiver.url, SECRET, max_attempts=1, timeout_secs=0.1, queue_size=1)
    assert alerter.send(alert_payload(flagged_row()))
    await asyncio.sleep(0)  # the worker takes the first alert off the queue
    assert alerter.send(alert_payload(flagged_row()))
    assert not alerter.send(alert_payload(flagged_row()))
    await alerter.drain(10)
    await alerter.close()
    assert alerter.stats.dropped == 1 and len(alerter.stats.failed) == 2
    assert "TimeoutError" in alerter.stats.failed[0]["_error"]


def test_a_secret_is_required() -> None:
    with pytest.raises(ValueError, match="secret"):
        WebhookAlerter("http://127.0.0.1/hook", "")
