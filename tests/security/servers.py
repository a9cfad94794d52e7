"""Real server processes for the attack suite: ``pipecat-harness proxy`` / ``console`` under uvicorn on loopback.

Everything a server writes (uvicorn's lines, loguru's, stdlib logging's, a
traceback) is kept, and checked when it stops: no credential the server was
given may appear in it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["ROOT", "Served", "credentials", "free_port", "run_cli", "serving"]

_CREDENTIAL_VARIABLE = re.compile(r"(SECRETS?|API_KEYS?|TOKENS?)$")

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


def credentials(env: Mapping[str, str]) -> list[str]:
    """The credentials among a server's environment variables (``*_SECRETS``, ``*_API_KEYS``, ``*_TOKEN(S)``)."""
    found: list[str] = []
    for name, raw in env.items():
        if not _CREDENTIAL_VARIABLE.search(name):
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        found += [value] if isinstance(value, str) else [str(v) for v in value]  # a dict's keys are its tokens
    return [v for v in found if v]


class Served(str):
    """A running server's base URL, with the log it has written so far."""

    log_path: Path

    def log(self) -> str:
        """Everything the server wrote to stdout and stderr."""
        return self.log_path.read_text(errors="replace")


@contextmanager
def serving(args: Sequence[str], env: Mapping[str, str] = {}, ready_path: str = "/health") -> Iterator[Served]:
    """Start ``pipecat-harness ARGS --port N`` and yield its base URL once ``ready_path`` answers.

    When the server stops, its whole output is checked for the credentials in ``env``.
    """
    port = free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="harness-server-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [sys.executable, "-m", "pipecat_harness.cli", *args, "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=_env(env), stdout=log_file, stderr=subprocess.STDOUT, text=True,
    )
    url = Served(f"http://127.0.0.1:{port}")
    url.log_path = Path(log_file.name)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"server exited {process.returncode}: {url.log()[-2000:]}")
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
        log_file.close()
        written = url.log()
        url.log_path.unlink()
    leaked = [line for line in written.splitlines() if any(secret in line for secret in credentials(env))]
    assert not leaked, f"{len(leaked)} line(s) of the server's log hold a credential of its environment"
