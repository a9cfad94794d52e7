"""Alerts: a verdict's severity, the design's webhook payload, its HMAC signature, and delivery off the loop.

``X-Harness-Signature`` is ``t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>">``. :class:`WebhookAlerter` posts from
a bounded in-memory queue (lost if the process dies; the grader uses :mod:`~pipecat_harness.grader.alert_outbox`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from loguru import logger
from tenacity import AsyncRetrying, RetryError, stop_after_attempt, wait_exponential

from pipecat_harness.grader.audit_row import AuditRow

__all__ = ["ALERT_EVENT", "PAYLOAD_FIELDS", "SEVERITY_ORDER", "SIGNATURE_HEADER", "Alerter", "SeverityPolicy",
           "WebhookAlerter", "WebhookStats", "alert_payload", "call_links", "post_signed", "sign", "turn_ref",
           "verify_signature"]

SIGNATURE_HEADER = "X-Harness-Signature"
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}

ALERT_EVENT = "hallucination_grader.flag"
#: The design's payload fields, in its order.
PAYLOAD_FIELDS = ("event", "severity", "tenant_id", "call_id", "turn_id", "verdict", "category", "claim",
                  "agent_utterance", "caller_utterance", "constraint_ref", "rationale", "confidence", "grader_model",
                  "constraint_list_version", "audit_row_ref", "links", "recommended_action")
#: Severity on the wire (the design's ``warn``) for the audit row's severity.
_WIRE_SEVERITY = {"info": "info", "warning": "warn", "critical": "critical"}
#: A starting opinion per category for the on-call, as an identifier like the design's.
_RECOMMENDED = {"price": "honour_or_correct_quote_callback_caller_within_2h",
                "hours": "confirm_hours_with_caller_before_visit", "policy": "refund_or_callback_caller_within_2h",
                "capability": "arrange_with_human_and_callback_caller",
                "action": "verify_action_then_do_it_or_tell_caller"}


@dataclass(frozen=True)
class SeverityPolicy:
    """Severity of a verdict (``unsupported`` in ``critical_categories``: critical, other flags: warning)."""

    critical_categories: frozenset[str] = frozenset({"price", "policy", "action"})
    alert_min_severity: str = "critical"

    def severity(self, verdict: str, category: str) -> str:
        """Severity of a verdict in a category."""
        if verdict == "unsupported":
            return "critical" if category in self.critical_categories else "warning"
        return "warning" if verdict in ("llm_flagged", "not_graded") else "info"

    def should_alert(self, severity: str) -> bool:
        """Whether a row of this severity goes to the webhook."""
        return SEVERITY_ORDER.get(severity, 0) >= SEVERITY_ORDER.get(self.alert_min_severity, 2)


class Alerter(Protocol):
    """Where the turn grader hands flagged rows' payloads (off the voice loop)."""

    async def dispatch(self, payload: dict[str, Any]) -> bool:
        """Queue one alert; ``False`` if it was not queued (full queue, already queued)."""

    async def close(self, timeout_secs: float = 5.0) -> None:
        """Deliver what is queued (bounded), then stop."""


def turn_ref(call_id: str, turn: int) -> str:
    """The design's turn id: ``turn_<call id without "call_">_<turn, 3 digits>`` (``turn_5af2c4_018``)."""
    return f"turn_{call_id.removeprefix('call_')}_{turn:03d}"


def call_links(tenant: str, call_id: str, turn: int | None = None, *, console_url: str | None = None) -> dict[str, str]:
    """Links into the console's call view, its transcript and its audio (relative without ``console_url``)."""
    base = f"{(console_url or '').rstrip('/')}/t/{quote(tenant, safe='')}/calls/{quote(call_id, safe='')}"
    anchor = f"#turn_{turn:03d}" if turn is not None else ""
    return {"operator_console": base + anchor, "transcript": f"{base}/transcript", "audio": f"{base}/audio"}


def alert_payload(row: AuditRow, *, console_url: str | None = None) -> dict[str, Any]:
    """The design's alert payload for a written, flagged audit row (its ``id`` is the audit reference)."""
    return {"event": ALERT_EVENT, "severity": _WIRE_SEVERITY.get(row.severity, row.severity), "tenant_id": row.tenant,
            "call_id": row.call_id, "turn_id": turn_ref(row.call_id, row.turn_id), "verdict": row.verdict,
            "category": row.category, "claim": row.claim, "agent_utterance": row.utterance,
            "caller_utterance": row.caller_utterance,
            "constraint_ref": [r.strip() for r in (row.constraint_ref or "").split(",") if r.strip()],
            "rationale": row.rationale, "confidence": row.confidence, "grader_model": row.grader_model,
            "constraint_list_version": row.constraints_version, "audit_row_ref": f"audit_{row.id}",
            "links": call_links(row.tenant, row.call_id, row.turn_id, console_url=console_url),
            "recommended_action": _RECOMMENDED.get(row.category, "review_turn")}


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """Return the signature header value for ``body``."""
    stamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={digest}"


def verify_signature(secret: str, body: bytes, header: str, *, tolerance_secs: float = 300.0) -> bool:
    """Check a signature header against the body (and that it is recent)."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        stamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    return abs(time.time() - stamp) <= tolerance_secs and hmac.compare_digest(sign(secret, body, stamp), header)


@dataclass
class WebhookStats:
    """What happened to the alerts so far."""

    delivered: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    attempts: int = 0


class WebhookAlerter:
    """Post signed alerts to a webhook from a background task, with exponential backoff from ``backoff_secs``.

    Alerts beyond ``queue_size`` waiting are dropped and counted, never blocking; ``formatter`` shapes the body.
    """

    def __init__(self, url: str, secret: str, *, max_attempts: int = 4, backoff_secs: float = 0.5,
                 timeout_secs: float = 5.0, queue_size: int = 256,
                 formatter: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        if not secret:
            raise ValueError("a webhook secret is required to sign alerts")
        self.url = url
        self.secret = secret
        self.max_attempts = max_attempts
        self.backoff_secs = backoff_secs
        self.timeout_secs = timeout_secs
        self.formatter = formatter
        self.stats = WebhookStats()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None

    def send(self, payload: dict[str, Any]) -> bool:
        """Queue an alert; returns ``False`` (and counts it) when the queue is full."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="grader-webhook")
        try:
            self._queue.put_nowait(payload)
        except asyncio.QueueFull:
            self.stats.dropped += 1
            logger.error(f"grader webhook queue full; alert for call {payload.get('call_id')} dropped")
            return False
        return True

    async def drain(self, timeout_secs: float = 30.0) -> None:
        """Wait until every queued alert is delivered or given up (at most ``timeout_secs``)."""
        if self._task is not None:
            await asyncio.wait_for(self._queue.join(), timeout_secs)

    async def close(self, timeout_secs: float = 5.0) -> None:
        """Deliver what is queued (bounded by ``timeout_secs``), then stop."""
        try:
            await self.drain(timeout_secs)
        except TimeoutError:
            logger.warning(f"grader webhook: {self._queue.qsize()} alert(s) undelivered at close")
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            payload = await self._queue.get()
            try:
                await self._deliver(payload)
            except Exception as exc:  # the body could not be built: nothing to retry
                self._give_up(payload, 0, f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    def _give_up(self, payload: dict[str, Any], attempts: int, error: str | None) -> None:
        logger.error(f"grader webhook {self.url}: gave up after {attempts} attempts ({error})")
        self.stats.failed.append({**payload, "_error": error})

    async def _deliver(self, payload: dict[str, Any]) -> None:
        body = json.dumps(self.formatter(payload) if self.formatter else payload, sort_keys=True).encode()
        attempts, error = 0, None
        if self.max_attempts < 1:
            return self._give_up(payload, attempts, error)  # no attempt allowed, as configured
        retrying = AsyncRetrying(stop=stop_after_attempt(self.max_attempts), wait=wait_exponential(self.backoff_secs))
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    self.stats.attempts += 1
                    try:
                        status = await asyncio.get_running_loop().run_in_executor(None, post_signed, self.url,
                                                                                  self.secret, body, self.timeout_secs)
                    except Exception as exc:  # any answer at all (http.client's errors are not all OSErrors)
                        error = f"{type(exc).__name__}: {str(exc)[:200]}"
                        raise
                    if not 200 <= status < 300:
                        error = f"HTTP {status}"
                        raise RuntimeError(error)
        except RetryError:
            self._give_up(payload, attempts, error)
        else:
            self.stats.delivered.append(payload)

    async def dispatch(self, payload: dict[str, Any]) -> bool:
        """Queue an alert (the observer's interface; same as :meth:`send`)."""
        return self.send(payload)


def post_signed(url: str, secret: str, body: bytes, timeout_secs: float) -> int:
    """POST ``body`` with its signature header (blocking: call it in an executor); return the HTTP status."""
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_secs) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
