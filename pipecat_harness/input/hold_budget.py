"""How long a wrapped stop strategy may wait, and whether a hold still fits the turn watchdog.

The wrapped strategy's wait plus the hold must stay inside ``user_turn_stop_timeout``, or the watchdog ends the turn.
"""

from __future__ import annotations

from typing import Any

from pipecat_harness._pipecat import external_stop_timeout, speech_timeout, turn_analyzer

__all__ = ["WATCHDOG_MARGIN_SECS", "HoldBudgetError", "check_hold_budget", "inner_wait_secs", "required_stop_timeout"]

#: Room left between a hold's release and the watchdog, for frames still in flight.
WATCHDOG_MARGIN_SECS = 0.5
#: Pipecat's P99 time-to-final for an STT that does not announce one (``pipecat.services.stt_latency``).
_DEFAULT_TTFS_P99 = 1.0


class HoldBudgetError(ValueError):
    """The wrapped strategy's wait plus the hold does not fit ``user_turn_stop_timeout``."""


def inner_wait_secs(strategy: Any, *, stt_p99_secs: float | None = None) -> float:
    """Longest time ``strategy`` (unknown kinds: 0 s) waits after the caller goes quiet before it ends a turn."""
    from pipecat.turns.user_stop import (
        ExternalUserTurnStopStrategy,
        SpeechTimeoutUserTurnStopStrategy,
        TurnAnalyzerUserTurnStopStrategy,
    )

    p99 = _DEFAULT_TTFS_P99 if stt_p99_secs is None else stt_p99_secs
    inner = getattr(strategy, "inner", None)
    if inner is not None:  # a wrapper (another hold, a deferred strategy) waits as long as what it wraps
        return inner_wait_secs(inner, stt_p99_secs=stt_p99_secs)
    if isinstance(strategy, SpeechTimeoutUserTurnStopStrategy):
        return max(speech_timeout(strategy), p99)
    if isinstance(strategy, TurnAnalyzerUserTurnStopStrategy):
        params = getattr(turn_analyzer(strategy), "params", None)
        return max(float(getattr(params, "stop_secs", 3.0)), p99)
    if isinstance(strategy, ExternalUserTurnStopStrategy):
        return external_stop_timeout(strategy)
    return 0.0


def required_stop_timeout(strategy: Any, extra_wait_secs: float, *, stt_p99_secs: float | None = None) -> float:
    """The smallest ``user_turn_stop_timeout`` that lets a full hold end the turn itself."""
    return round(inner_wait_secs(strategy, stt_p99_secs=stt_p99_secs) + extra_wait_secs + WATCHDOG_MARGIN_SECS, 3)


def check_hold_budget(strategy: Any, extra_wait_secs: float, user_turn_stop_timeout: float, *,
                      stt_p99_secs: float | None = None) -> None:
    """Refuse a hold that the turn watchdog would cut short (``HoldBudgetError`` names the numbers and fixes)."""
    wait = inner_wait_secs(strategy, stt_p99_secs=stt_p99_secs)
    needed = required_stop_timeout(strategy, extra_wait_secs, stt_p99_secs=stt_p99_secs)
    if user_turn_stop_timeout + 1e-9 < needed:
        fitting = max(0.0, user_turn_stop_timeout - wait - WATCHDOG_MARGIN_SECS)
        raise HoldBudgetError(f"identifier hold does not fit the turn watchdog: {type(strategy).__name__} waits up to "
                              f"{wait:.2f} s and identifier_hold.extra_wait_secs adds {extra_wait_secs:.2f} s, but "
                              f"user_turn_stop_timeout is {user_turn_stop_timeout:.2f} s; raise user_turn_stop_timeout "
                              f"to at least {needed:.2f} s or lower extra_wait_secs to {fitting:.2f} s")
