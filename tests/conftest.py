"""Shared test setup: keep Pipecat's per-frame logging out of test output."""

import sys

from loguru import logger

logger.remove()
logger.add(sys.stderr, level="WARNING")
