"""When a held turn end may be released: the cap on held silence, the STT's P99, the turn watchdog.

Only held silence counts toward ``max_hold_secs``; a release comes no sooner than the STT's P99 after the last
VAD stop, and no later than the aggregator's watchdog.
"""

from __future__ import annotations

import math

from pipecat_harness.input.hold_budget import WATCHDOG_MARGIN_SECS
from pipecat_harness.input.identifier_formats import IdentifierHoldConfig

__all__ = ["HoldTiming"]

#: How long an interim keeps the timer from firing when the STT announced no P99.
_INTERIM_GRACE_SECS = 0.5


class HoldTiming:
    """The clock readings one hold needs (event-loop times), with its waits and the watchdog, when known."""

    def __init__(self, config: IdentifierHoldConfig, stop_timeout: float | None = None) -> None:
        self._config = config
        self.stop_timeout = stop_timeout
        self.stt_p99: float | None = None
        self.last_activity: float | None = None
        self.last_speech_stop: float | None = None
        self.reset_turn()

    def reset_turn(self) -> None:
        """Forget the held silence of the last turn."""
        self._held_secs = 0.0
        self._silence_since: float | None = None

    def silence_started(self, now: float) -> None:
        """The caller went quiet while the turn is held (no-op if already counting)."""
        if self._silence_since is None:
            self._silence_since = now

    def silence_ended(self, now: float) -> None:
        """The caller spoke again or the hold ended: bank the silence so far."""
        if self._silence_since is not None:
            self._held_secs += now - self._silence_since
            self._silence_since = None

    def held_secs(self, now: float) -> float:
        """Silence held so far in this turn."""
        return self._held_secs + (now - self._silence_since if self._silence_since is not None else 0.0)

    def cap_left(self, now: float) -> float:
        """How much more silence ``max_hold_secs`` allows."""
        return max(0.0, self._config.max_hold_secs - self.held_secs(now))

    def _watchdog_due(self) -> float:
        if self.stop_timeout is None or self.last_activity is None:
            return math.inf
        return self.last_activity + self.stop_timeout - WATCHDOG_MARGIN_SECS

    def round_wait(self, now: float, wait_secs: float | None = None) -> float:
        """The wait of a new hold round: ``wait_secs`` (default ``extra_wait_secs``), within the cap and watchdog."""
        wait = min(self._config.extra_wait_secs if wait_secs is None else wait_secs, self.cap_left(now))
        return max(0.0, min(wait, self._watchdog_due() - now))

    def release_due(self, deadline: float) -> float:
        """When a round with ``deadline`` releases: after the STT's P99 past the last VAD stop, before the watchdog."""
        return min(max(deadline, (self.last_speech_stop or 0.0) + (self.stt_p99 or 0.0)), self._watchdog_due())

    def after_interim(self, now: float, deadline: float) -> float:
        """The deadline after an interim in silence: the STT is still working, give it its P99, within the cap."""
        return max(deadline, now + min(self.stt_p99 or _INTERIM_GRACE_SECS, self.cap_left(now)))
