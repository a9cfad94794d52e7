"""Input controls: the ending rules, the identifier hold, the spelling normalizer and the silent-reply guard.

The ending rules import no Pipecat code; the Pipecat pieces load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pipecat_harness.input.endings import IDENTIFIER_CUES, HoldDecision, hold_decision
from pipecat_harness.input.identifier_formats import DOMAIN_WAIT_SECS, IdentifierFormat, IdentifierHoldConfig

__all__ = ["DOMAIN_WAIT_SECS", "IDENTIFIER_CUES", "HoldDecision", "IdentifierFormat", "IdentifierHoldConfig",
           "IdentifierHoldStopStrategy", "SilentReplyGuard", "SpellingNormalizer", "hold_decision"]

_PIPECAT_EXPORTS = {"IdentifierHoldStopStrategy": "pipecat_harness.input.identifier_hold",
                    "SpellingNormalizer": "pipecat_harness.input.spelling",
                    "SilentReplyGuard": "pipecat_harness.input.silent_reply"}


def __getattr__(name: str) -> Any:
    module = _PIPECAT_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pipecat_harness.input' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


if TYPE_CHECKING:
    from pipecat_harness.input.identifier_hold import IdentifierHoldStopStrategy
    from pipecat_harness.input.silent_reply import SilentReplyGuard
    from pipecat_harness.input.spelling import SpellingNormalizer
