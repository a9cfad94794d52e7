"""The done-when check: a simulated call with a wrong price and an unexecuted action claim."""

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web

from pipecat_harness.config import HarnessConfig
from pipecat_harness.grader.alerts import SIGNATURE_HEADER, verify_signature
from pipecat_harness.grader.audit import AuditStore
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import load_scenario
from tests.grader.grader_browser import chromium_page
from tests.grader.test_grader_console import TOKEN, serve

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "pipecat_harness" / "scenarios" / "grader_wrong_price_unexecuted_action.yaml"
RETAIL = ROOT / "pipecat_harness" / "grader" / "data" / "retail.yaml"
SECRET = "webhook-secret"


@pytest.mark.chromium
async def test_wrong_price_and_unexecuted_action_reach_audit_webhook_and_console(tmp_path: Path) -> None:
    received: list[tuple[dict, bool]] = []

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        received.append((json.loads(body), verify_signature(SECRET, body, request.headers.get(SIGNATURE_HEADER, ""))))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    audit_url = f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}"
    config = HarnessConfig(
        grader={"enabled": True, "constraints_path": str(RETAIL), "audit_url": audit_url,
                "webhook_url": f"http://127.0.0.1:{port}/hook", "webhook_secret": SECRET,
                "console_url": "http://console.example"},
        trace={"enabled": False},
    ).only("grader")
    try:
        # The simulator runs the call on its own virtual-time loop; the webhook receiver stays on this one.
        result = await asyncio.to_thread(run_scenario, load_scenario(SCENARIO), config, max_wall_secs=60)
    finally:
        await runner.cleanup()
    assert all(check.ok for check in result.checks)

    store = AuditStore(audit_url)
    rows = await store.rows()
    critical = [r for r in rows if r.severity == "critical"]
    assert [(r.category, r.verdict, r.constraint_ref) for r in critical] == [
        ("price", "unsupported", "px_thermostat"), ("action", "unsupported", "ledger")]
    assert critical[0].caller_utterance == "Hi, how much is the smart thermostat?"
    assert {r.verdict for r in rows} == {"supported", "unsupported"}  # supported turns are audited too

    assert sorted(p["category"] for p, _ in received) == ["action", "price"]
    assert all(signed for _, signed in received)
    assert {p["audit_row_ref"] for p, _ in received} == {f"audit_{r.id}" for r in critical}
    assert received[0][0]["links"]["operator_console"].startswith("http://console.example/t/acme_retail/calls/")

    async with serve(store) as base, chromium_page() as page:
        await page.goto(f"{base}/?token={TOKEN}")
        cards = await page.evaluate(
            "[...document.querySelectorAll('article.card')].map(c => [c.dataset.category, c.innerText])")
    await store.close()
    assert [category for category, _ in cards] == ["action", "price"]  # newest first
    assert "I've updated the address on your order." in cards[0][1]
    assert "listed at $45" in cards[1][1] and "px_thermostat" in cards[1][1]
