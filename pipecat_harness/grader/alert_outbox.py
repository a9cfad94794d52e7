"""Alerts through an outbox of their own (:data:`ALERT_TABLE_PREFIX`), delivered signed, surviving a crash.

Each alert is queued once per audit row; an ``OutboxPublisher`` delivers it with the outbox's retries.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from loguru import logger

from pipecat_harness.grader.alert_formats import Formatter
from pipecat_harness.grader.alerts import ALERT_EVENT, post_signed
from pipecat_harness.tools.ledger import OperationLedger
from pipecat_harness.tools.outbox import OutboxEvent, OutboxPublisher

__all__ = ["ALERT_TABLE_PREFIX", "OutboxAlerter"]

#: Table prefix of the alerts' own outbox.
ALERT_TABLE_PREFIX = "grader_alerts_"


class OutboxAlerter:
    """Queue alerts in an outbox (in ``ledger``, or its URL) and deliver them, signed, to a webhook from it.

    With ``publish=False`` another process delivers; an alert undelivered after ``max_attempts`` stays pending.
    """

    def __init__(self, ledger: OperationLedger | str, url: str, secret: str, *, formatter: Formatter | None = None,
                 publish: bool = True, max_attempts: int = 10, retry_delay_secs: float = 0.5,
                 interval_secs: float = 1.0, timeout_secs: float = 5.0) -> None:
        if not secret:
            raise ValueError("a webhook secret is required to sign alerts")
        self._owns_ledger = isinstance(ledger, str)
        self.ledger = OperationLedger(ledger, table_prefix=ALERT_TABLE_PREFIX) if isinstance(ledger, str) else ledger
        self.url = url
        self.secret = secret
        self.formatter = formatter
        self.publish = publish
        self.interval_secs = interval_secs
        self.timeout_secs = timeout_secs
        self.delivered: list[dict[str, Any]] = []
        self.publisher = OutboxPublisher(self.ledger, self._deliver, max_attempts=max_attempts,
                                         retry_delay_secs=retry_delay_secs)
        self._ready = False

    async def _prepare(self) -> None:
        if not self._ready:
            await self.ledger.create_tables()
            self._ready = True

    async def dispatch(self, payload: dict[str, Any]) -> bool:
        """Append the alert to the outbox (committed on return) and wake the publisher; ``False`` if already queued."""
        await self._prepare()
        key = f"{payload.get('call_id')}:{payload.get('audit_row_ref')}"
        appended = await self.ledger.append_event(str(payload.get("tenant_id", "")), key, ALERT_EVENT, payload)
        if self.publish:
            self.publisher.start(interval_secs=self.interval_secs)
            self.publisher.notify()
        return appended

    async def pending(self) -> list[OutboxEvent]:
        """Alerts queued and not yet delivered."""
        await self._prepare()
        return await self.publisher.pending()

    async def drain(self, timeout_secs: float = 30.0) -> int:
        """Deliver what is pending now (at most ``timeout_secs``); return how many were delivered."""
        await self._prepare()
        return await asyncio.wait_for(self.publisher.drain(), timeout_secs)

    async def close(self, timeout_secs: float = 5.0) -> None:
        """Try to deliver what is pending (bounded), then stop; undelivered alerts stay queued."""
        await self.publisher.stop()  # one publisher at a time from here: no second delivery of the same row
        try:
            if self.publish and self._ready:
                await self.drain(timeout_secs)
        except TimeoutError:
            logger.warning("grader alerts: some alerts stay queued in the outbox at close")
        if self._owns_ledger:
            await self.ledger.close()

    async def _deliver(self, event: OutboxEvent) -> None:
        if event.event_type != ALERT_EVENT:
            logger.warning(f"grader alert outbox: ignoring {event.event_type} event {event.event_id}")
            return
        body = json.dumps(self.formatter(event.payload) if self.formatter else event.payload, sort_keys=True).encode()
        loop = asyncio.get_running_loop()
        status = await loop.run_in_executor(None, post_signed, self.url, self.secret, body, self.timeout_secs)
        if not 200 <= status < 300:
            raise RuntimeError(f"webhook {self.url} answered HTTP {status}")
        self.delivered.append(event.payload)
