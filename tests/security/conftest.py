"""Every attack test's in-process logs (loguru and stdlib logging, every level) are checked for its credentials.

A test module lists the credentials it hands the code under attack in ``CREDENTIALS``; after each of its tests,
no line logged in this process may contain one. (Server processes are checked by
:func:`tests.security.servers.serving`.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from loguru import logger

#: The attacking side's own clients (its HTTP requests, its DevTools socket to Chromium) log what they send.
_CLIENT_LOGGERS = frozenset({"httpx", "websockets.client"})


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        if record.name not in _CLIENT_LOGGERS:
            self.lines.append(self.format(record))


@pytest.fixture(autouse=True)
def no_credential_in_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    credentials = [c for c in getattr(request.module, "CREDENTIALS", ()) if c]
    if not credentials:
        yield
        return
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level=0, format="{message}\n{exception}")
    handler = _Lines(lines)
    loggers = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.access")]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.remove(sink)
        for log, level in zip(loggers, levels, strict=True):
            log.removeHandler(handler)
            log.setLevel(level)
    leaked = [line[:200] for line in lines if any(c in line for c in credentials)]
    assert not leaked, f"{len(leaked)} log line(s) of this process hold a credential of the test"
