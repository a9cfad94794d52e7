"""The evidence an identifier hold records with each of its decisions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger

from pipecat_harness.input.endings import HoldDecision
from pipecat_harness.input.identifier_formats import IdentifierHoldConfig

__all__ = ["HoldEvidence"]

_EVIDENCE_CHARS = 240


class HoldEvidence:
    """Builds the evidence of hold decisions and hands it to a sink that must never break a turn.

    Args:
        config: The hold's settings (the domain goes into every record).
        strategy: Name of the wrapped stop strategy.
        sink: Receives ``(action, evidence)``; ``None`` records nothing.
    """

    def __init__(
        self, config: IdentifierHoldConfig, strategy: str, sink: Callable[[str, dict[str, Any]], Any] | None
    ) -> None:
        self._config = config
        self._strategy = strategy
        self._sink = sink

    def decision(
        self,
        action: str,
        decision: HoldDecision,
        text: str,
        *,
        holds: int,
        held_secs: float,
        added_secs: float,
        **extra: Any,
    ) -> None:
        """Record a hold, resume, merge or release with the turn text and the rule that decided."""
        self.record(action, {
            "text": text[-_EVIDENCE_CHARS:],
            "text_chars": len(text),
            "rule": decision.rule,
            "reason": decision.reason,
            "identifier": decision.identifier,
            "domain": self._config.domain,
            "strategy": self._strategy,
            "holds": holds,
            "held_ms": round(held_secs * 1000),
            "added_wait_ms": round(added_secs * 1000),
            **extra,
        })

    def record(self, action: str, evidence: dict[str, Any]) -> None:
        """Hand one record to the sink; a failing sink is logged, never raised."""
        if self._sink is None:
            return
        try:
            self._sink(action, evidence)
        except Exception as exc:  # recording must never break the turn
            logger.warning(f"identifier hold: recording a decision failed: {exc}")
