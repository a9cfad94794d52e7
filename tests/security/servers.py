"""Real server processes for the attack suite: ``pipecat-harness proxy`` / ``console`` under uvicorn on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["ROOT", "free_port", "run_cli", "serving"]

ROOT = Path(__file__).parents[2]


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPECAT_HARNESS_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli(args: Sequence[str], env: Mapping[str, str] = {}, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``pipecat-harness ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "pipecat_harness.cli", *args],
        cwd=ROOT, env=_env(env), capture_output=True, text=True, timeout=timeout, check=False,
    )


@contextmanager
def serving(args: Sequence[str], env: Mapping[str, str] = {}, ready_path: str = "/health") -> Iterator[str]:
    """Start ``pipecat-harness ARGS --port N`` and yield its base URL once ``ready_path`` answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "pipecat_harness.cli", *args, "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"server exited {process.returncode}: {process.stderr.read()[-2000:]}")
            try:
                if httpx.get(url + ready_path, timeout=1).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server did not start within 60 s")
            time.sleep(0.05)
        yield url
        assert process.poll() is None, "the server died during the test"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
