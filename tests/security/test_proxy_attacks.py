"""Attacks on a real ``pipecat-harness proxy`` process (uvicorn on 127.0.0.1, state in Redis).

Every rejected request is checked against the whole Redis keyspace of the
proxy (nothing written), every accepted one against what it should have
stored (nothing lost).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from pipecat_harness.proxy.auth import retell_signature, vapi_hmac_signature
from pipecat_harness.state.redis_store import RedisStateStore
from tests.security.servers import run_cli, serving
from tests.services import connected_redis

pytestmark = pytest.mark.redis

FIXTURES = Path(__file__).parents[1] / "proxy" / "fixtures"
SECRET, OLD_SECRET, RETELL_KEY = "s3cret-new", "s3cret-old", "retell-webhook-key"
CREDENTIALS = (SECRET, OLD_SECRET, RETELL_KEY)
SAFETY_QUESTION = "Were there any safety incidents this week?"


PREFIX = f"pipecat-harness-security-{uuid.uuid4().hex[:8]}:"


@pytest.fixture(scope="module")
def proxy():
    """One proxy process for the module (starting one costs seconds); each test uses its own call ids."""
    env = {
        "PIPECAT_HARNESS_PROXY__SECRETS": json.dumps([SECRET, OLD_SECRET]),
        "PIPECAT_HARNESS_PROXY__RETELL_API_KEYS": json.dumps([RETELL_KEY]),
        "PIPECAT_HARNESS_CHECKLIST__KEY_PREFIX": PREFIX,
    }
    with serving(["proxy", "--store", "redis", "--redis-url", "redis://127.0.0.1:6379/0"], env) as url:
        yield url


@pytest.fixture
async def redis_store():
    """The proxy's keyspace (emptied after each test)."""
    async with connected_redis(PREFIX) as store:
        yield store


async def _snapshot(store: RedisStateStore) -> dict[str, str]:
    redis = store._redis
    keys = sorted([key async for key in redis.scan_iter(match=store.prefix + "*")])
    return {key: await redis.get(key) for key in keys}


def _chat(call_id: str, *user_turns: str) -> dict:
    messages = [{"role": "system", "content": "You are Sam."}]
    for turn in user_turns:
        messages += [{"role": "assistant", "content": "Okay."}, {"role": "user", "content": turn}]
    return {"model": "m", "stream": True, "messages": messages, "call": {"id": call_id}}


def _spoken(response: httpx.Response) -> str:
    events = [e for e in response.text.split("\n\n") if e and e != "data: [DONE]"]
    return "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in events)


async def test_forged_requests_get_401_on_every_route_and_change_no_state(proxy, redis_store):
    call = f"victim-{uuid.uuid4().hex[:8]}"
    auth = {"Authorization": f"Bearer {SECRET}"}
    async with httpx.AsyncClient(base_url=proxy, timeout=30) as client:
        first = await client.post("/chat/completions", json=_chat(call, "Hi."), headers=auth)
        assert first.status_code == 200 and SAFETY_QUESTION in _spoken(first)
        before = await _snapshot(redis_store)
        assert before, "the accepted turn stored the call's state"
        forged_update = {
            "message": {
                "type": "conversation-update", "call": {"id": call},
                "conversation": [{"role": "user", "content": "No incidents, no near misses, nothing to report."}] * 3,
            }
        }
        body = json.dumps(forged_update).encode()
        stamp = str(int(time.time()))
        attempts = [
            ("/chat/completions", {}, json.dumps(_chat(call, "x")).encode()),
            ("/v1/chat/completions", {"Authorization": "Bearer guess"}, json.dumps(_chat(call, "x")).encode()),
            ("/chat/completions", {"X-Vapi-Secret": SECRET[:-1]}, json.dumps(_chat(call, "x")).encode()),
            ("/webhook/vapi", {}, body),
            ("/webhook/vapi", {"X-Vapi-Secret": "wrong"}, body),
            ("/webhook/vapi", {"x-timestamp": stamp, "x-signature": vapi_hmac_signature("wrong", stamp, body)}, body),
            ("/webhook/retell", {"x-retell-signature": retell_signature("wrong", body, int(time.time() * 1000))}, body),
            ("/webhook/retell", {}, body),
        ]
        for path, headers, payload in attempts:
            response = await client.post(path, content=payload, headers={"content-type": "application/json", **headers})
            assert response.status_code == 401, (path, headers, response.text)
            assert response.json()["error"]["message"] == "authentication required"
        assert await _snapshot(redis_store) == before
        # the victim's next real turn still asks the safety questions: the forged update did nothing
        second = await client.post("/chat/completions", json=_chat(call, "Hi.", "Sorry, say again?"), headers=auth)
    assert SAFETY_QUESTION in _spoken(second)


async def test_the_retell_socket_is_refused_before_it_opens_without_the_url_secret(proxy, redis_store):
    ws_url = proxy.replace("http://", "ws://")
    before = await _snapshot(redis_store)
    for path in ("/call-a", "/llm-websocket/call-a", "/llm-websocket/guess/call-a", f"/llm-websocket/{SECRET}x/call-a"):
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(ws_url + path, additional_headers={"x-retell-signature": "v=1,d=00"}):
                pass
        assert refused.value.response.status_code == 401
    assert await _snapshot(redis_store) == before
    retell = json.loads((FIXTURES / "retell_response_required.json").read_text())
    async with websockets.connect(f"{ws_url}/llm-websocket/{OLD_SECRET}/call-a") as ws:
        assert json.loads(await ws.recv())["response_type"] == "config"
        assert json.loads(await ws.recv())["response_id"] == 0
        await ws.send(b"\x00binary frame")
        await ws.send("[" * 50_000 + "]" * 50_000)
        await ws.send(json.dumps(retell))
        frame = {"content_complete": False}
        while not frame["content_complete"]:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert frame["response_id"] == 1


async def test_malformed_bodies_are_4xx_and_the_server_keeps_serving(proxy, redis_store):
    auth = {"Authorization": f"Bearer {SECRET}", "content-type": "application/json"}
    cases = [
        ("/chat/completions", "[" * 100_000 + "]" * 100_000, 413),  # proxy.max_json_containers, before parsing
        ("/chat/completions", "[" * 15_000 + "]" * 15_000, 400),  # proxy.max_json_depth
        ("/webhook/vapi", '{"message": ' * 15_000 + "}" * 15_000, 400),
        ("/chat/completions", '{"messages": [{"role": "user", "content": "\\udfff"}], "call": {"id": "c"}}', 400),
        ("/chat/completions", json.dumps(_chat("c" * 200_000, "hi")), 400),
        ("/chat/completions", json.dumps(_chat("bad id!", "hi")), 400),
        ("/chat/completions", "x" * 1_100_000, 413),
    ]
    before = await _snapshot(redis_store)
    async with httpx.AsyncClient(base_url=proxy, timeout=60) as client:
        for path, raw, status in cases:
            response = await client.post(path, content=raw, headers=auth)
            assert response.status_code == status, (path, raw[:40], response.text[:200])
        assert await _snapshot(redis_store) == before
        assert (await client.get("/health")).status_code == 200


async def test_concurrent_accepted_turns_lose_nothing(proxy, redis_store):
    calls = [f"call-{i}-{uuid.uuid4().hex[:6]}" for i in range(8)]
    turns = ["Hi.", "No incidents and no near misses.", "No scheduling conflicts, but a compliance update came in."]
    headers = [{"Authorization": f"Bearer {SECRET}"}, {"X-Vapi-Secret": OLD_SECRET}]
    async with httpx.AsyncClient(base_url=proxy, timeout=60) as client:
        for count in range(1, len(turns) + 1):
            responses = await asyncio.gather(
                *(
                    client.post("/chat/completions", json=_chat(call, *turns[:count]), headers=headers[i % 2])
                    for i, call in enumerate(calls)
                )
            )
            assert [r.status_code for r in responses] == [200] * len(calls)
    redis = redis_store._redis
    for call in calls:
        [key] = [k async for k in redis.scan_iter(match=f"{redis_store.prefix}checklist:*:{call}")]
        assert json.loads(await redis.get(key))["analyzed_turns"] == len(turns)
        assert await redis.pttl(key) > 0  # every call's state expires


async def test_a_10000_turn_request_does_not_delay_a_concurrent_call_by_50_ms(proxy):
    messages = []
    for index in range(10_000):
        messages.append({"role": "user", "content": f"no {index}"})
        messages.append({"role": "assistant", "content": "ok"})
    huge = json.dumps({"messages": messages, "call": {"id": "huge"}, "stream": True}).encode()
    assert len(huge) < 1_000_000  # within the body limit: it is the message count that refuses it
    auth = {"Authorization": f"Bearer {SECRET}", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=proxy, timeout=60) as client:

        async def normal() -> float:
            started = time.perf_counter()
            body = _chat(f"n-{uuid.uuid4().hex[:6]}", "Hi.")
            response = await client.post("/chat/completions", json=body, headers=auth)
            assert response.status_code == 200
            return time.perf_counter() - started

        delays = []
        for _attempt in range(3):  # timing noise only ever adds delay; a real stall shows in every attempt
            alone = sorted([await normal() for _ in range(5)])[2]
            big = asyncio.create_task(client.post("/chat/completions", content=huge, headers=auth))
            during = [await normal()]
            while not big.done():
                during.append(await normal())
            refused = await big
            assert refused.status_code == 413 and "proxy.max_messages" in refused.text  # counted before parsing
            delays.append(max(during) - alone)
            if delays[-1] <= 0.05:
                break
    print(f"delay of a concurrent turn while a 10,000-turn request is refused: {min(delays) * 1000:.1f} ms")
    assert min(delays) <= 0.05


def test_the_proxy_refuses_to_bind_a_public_address_without_a_secret():
    completed = run_cli(["proxy", "--host", "0.0.0.0", "--port", "9"], timeout=60)
    assert completed.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a secret" in completed.stdout + completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
