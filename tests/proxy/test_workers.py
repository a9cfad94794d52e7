"""Several proxy processes share one call's state through Redis."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest
import yaml

from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.cli import main
from pipecat_harness.state.redis_store import RedisStateStore
from tests.proxy.test_openai_client import WALK, _assert_walk, _stream
from tests.services import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def _proxies(config: Path, *extra: str, count: int = 1) -> Iterator[list[str]]:
    """``count`` ``pipecat-harness proxy`` processes (scripted upstream), started together, until the block ends."""
    ports = [_free_port() for _ in range(count)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "pipecat_harness.cli", "proxy", "--port", str(port), "--config", str(config),
             "--log-level", "warning", *extra],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        for port in ports
    ]
    try:
        deadline = time.monotonic() + 90
        for port, process in zip(ports, processes, strict=True):
            while True:
                if process.poll() is not None:
                    output = process.stdout.read().decode() if process.stdout else ""
                    raise RuntimeError(f"proxy exited with {process.returncode}: {output[-2000:]}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("proxy did not start") from None
                    time.sleep(0.1)
        yield [f"http://127.0.0.1:{port}/v1" for port in ports]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


@pytest.fixture
def redis_config(tmp_path: Path, redis_store: RedisStateStore) -> Path:
    path = tmp_path / "harness.yaml"
    checklist = {"store": "redis", "redis_url": REDIS_URL, "key_prefix": redis_store.prefix}
    path.write_text(yaml.safe_dump({"checklist": checklist}))
    return path


@pytest.mark.redis
async def test_two_processes_serve_one_calls_turns_alternately_with_the_state_intact(redis_config, redis_store):
    with _proxies(redis_config, count=2) as urls:
        clients = [openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0) for url in urls]
        messages = [
            {"role": "system", "content": "You are Sam from Acme Builders."},
            {"role": "assistant", "content": "Hi, it's Sam with the weekly check-in."},
        ]
        spoken = []
        for number, turn in enumerate(WALK["turns"]):
            messages.append({"role": "user", "content": turn["say"]})
            text, _, finish = await _stream(clients[number % 2], messages, "two-workers")
            assert finish == "stop"
            spoken.append(text)
            messages.append({"role": "assistant", "content": text})
        for client in clients:
            await client.close()
    # The same questions, in the same order, as one process asks them: nothing asked twice, nothing skipped.
    _assert_walk(spoken)
    state = await ChecklistDriver(bundled_checklist(), redis_store).load("two-workers")
    assert state.asked == WALK["expected_asked"]
    assert state.analyzed_turns == len(WALK["turns"])


@pytest.mark.redis
async def test_workers_option_serves_from_several_processes(redis_config):
    with _proxies(redis_config, "--workers", "2") as [url]:
        client = openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
        texts = [(await _stream(client, [{"role": "user", "content": "Hello?"}], f"workers-{i}"))[0] for i in range(4)]
        await client.close()
    assert all(text.endswith("?") for text in texts)  # every call got its first checklist question


def test_several_workers_need_shared_state(capsys):
    assert main(["proxy", "--workers", "2", "--store", "memory"]) == 2
    assert "--workers above 1 needs --store redis" in capsys.readouterr().out
    assert main(["proxy", "--workers", "0"]) == 2
