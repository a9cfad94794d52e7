"""Grader alerts travel through the tool outbox: a queued alert outlives a SIGKILL of its process."""

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

from pipecat_harness.grader.alert_formats import teams_message
from pipecat_harness.grader.alert_outbox import OutboxAlerter
from pipecat_harness.grader.alerts import PAYLOAD_FIELDS, alert_payload
from tests.grader.test_grader_alerts import SECRET, Receiver, flagged_row, receiver  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]

#: A call's grader that flags a wrong price, queues the alert (the webhook is down) and then hangs.
_CHILD = textwrap.dedent("""
    import asyncio, sys
    from pipecat_harness.grader.alert_outbox import OutboxAlerter
    from pipecat_harness.grader.audit import AuditStore
    from pipecat_harness.grader.constraints import ConstraintList
    from pipecat_harness.grader.observer import TurnGrader
    from pipecat_harness.grader.rules import RuleGrader

    async def main(directory):
        constraints = ConstraintList.load(sys.argv[2])
        audit = AuditStore(f"sqlite+aiosqlite:///{directory}/audit.db")
        alerter = OutboxAlerter(f"sqlite+aiosqlite:///{directory}/alerts.db", "http://127.0.0.1:9/hook", "s3cret",
                                retry_delay_secs=60, interval_secs=60)
        grader = TurnGrader(RuleGrader(constraints), audit=audit, tenant="sparkle", call_id="call_k1ll",
                            constraints_version=constraints.version_id, alerter=alerter,
                            console_url="https://console.example")
        grader.submit("A quick detail runs about $129.", "How much for a quick detail?")
        await grader.drain(20)
        print("queued", len(await alerter.pending()), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(sys.argv[1]))
""")


async def test_a_queued_critical_alert_survives_sigkill_and_is_delivered_signed(
    tmp_path: Path, receiver: Receiver  # noqa: F811
) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, str(tmp_path), str(ROOT / "pipecat_harness/grader/data/detailing.yaml"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert child.stdout is not None
    try:
        line = await asyncio.wait_for(child.stdout.readline(), 60)
        assert line.decode().split() == ["queued", "1"]
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL

    # A fresh process (here: this one) on the same outbox delivers what the killed one queued.
    alerter = OutboxAlerter(f"sqlite+aiosqlite:///{tmp_path}/alerts.db", receiver.url, SECRET, publish=False)
    [event] = await alerter.pending()
    assert event.event_type == "hallucination_grader.flag"
    assert await alerter.drain(10) == 1
    assert await alerter.pending() == []
    await alerter.close()
    assert receiver.signatures_ok == [True]
    [body] = receiver.bodies
    assert list(body) == sorted(PAYLOAD_FIELDS)  # signed body is sorted JSON of the design's fields
    assert (body["severity"], body["category"], body["call_id"]) == ("critical", "price", "call_k1ll")
    assert body["links"]["operator_console"].startswith("https://console.example/t/sparkle/calls/call_k1ll#turn_")


async def test_an_alert_is_queued_once_and_retried_until_the_webhook_answers(
    tmp_path: Path, receiver: Receiver  # noqa: F811
) -> None:
    receiver.fail_first = 2
    alerter = OutboxAlerter(f"sqlite+aiosqlite:///{tmp_path}/alerts.db", receiver.url, SECRET,
                            formatter=teams_message, retry_delay_secs=0.01, interval_secs=0.05)
    payload = alert_payload(flagged_row())
    assert await alerter.dispatch(payload)
    assert not await alerter.dispatch(payload)  # the same audit row is one alert
    async with asyncio.timeout(10):
        while await alerter.pending():
            await asyncio.sleep(0.02)
    await alerter.close()
    assert receiver.hits == 3 and receiver.signatures_ok == [True]
    assert receiver.bodies[0]["type"] == "message" and alerter.delivered == [json.loads(json.dumps(payload))]



def test_settings_choose_the_outbox_and_the_channel_format(tmp_path: Path) -> None:
    import pytest

    from pipecat_harness.config import ConfigError, GraderSettings
    from pipecat_harness.grader.control import _alerter

    settings = GraderSettings(webhook_url="https://events.pagerduty.com/v2/enqueue", webhook_secret="k",
                              webhook_format="pagerduty", pagerduty_routing_key="R0UT1NG",
                              alert_outbox_url=f"sqlite+aiosqlite:///{tmp_path}/alerts.db")
    alerter = _alerter(settings)
    assert isinstance(alerter, OutboxAlerter) and alerter.formatter is not None
    assert alerter.formatter(alert_payload(flagged_row()))["routing_key"] == "R0UT1NG"
    with pytest.raises(ConfigError, match="pagerduty_routing_key"):
        _alerter(settings.model_copy(update={"pagerduty_routing_key": None}))
