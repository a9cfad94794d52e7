"""When a held turn end may be released: the cap on held silence, the STT's P99, the turn watchdog.

Only *silence* the hold keeps the turn open through counts toward
``max_hold_secs``: the caller's own speaking time does not. A release never
comes sooner than the STT's P99 (from ``STTMetadataFrame``) after the last VAD
stop, the time the final of the last words may take, and never later than the
user aggregator's watchdog would end the turn anyway.
"""

from __future__ import annotations

from pipecat_harness.input.hold_budget import WATCHDOG_MARGIN_SECS
from pipecat_harness.input.identifier_formats import IdentifierHoldConfig

__all__ = ["HoldTiming"]

#: How long an interim keeps the timer from firing when the STT announced no P99.
_INTERIM_GRACE_SECS = 0.5


class HoldTiming:
    """The clock readings one hold needs, kept per turn (times are the event loop's).

    Args:
        config: The hold's waits (``extra_wait_secs``, ``max_hold_secs``).
        stop_timeout: The aggregator's ``user_turn_stop_timeout``, when known.
    """

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

    # --- held silence -------------------------------------------------------------------------------

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

    # --- deadlines ----------------------------------------------------------------------------------

    def _watchdog_due(self) -> float | None:
        if self.stop_timeout is None or self.last_activity is None:
            return None
        return self.last_activity + self.stop_timeout - WATCHDOG_MARGIN_SECS

    def round_wait(self, now: float, wait_secs: float | None = None) -> float:
        """The wait of a new hold round: ``wait_secs`` (default ``extra_wait_secs``), within the cap and watchdog."""
        wait = min(self._config.extra_wait_secs if wait_secs is None else wait_secs, self.cap_left(now))
        watchdog = self._watchdog_due()
        if watchdog is not None:
            wait = min(wait, watchdog - now)
        return max(0.0, wait)

    def release_due(self, deadline: float) -> float:
        """When a round with ``deadline`` releases: after the STT's P99 past the last VAD stop, before the watchdog."""
        due = max(deadline, (self.last_speech_stop or 0.0) + (self.stt_p99 or 0.0))
        watchdog = self._watchdog_due()
        return min(due, watchdog) if watchdog is not None else due

    def after_interim(self, now: float, deadline: float) -> float:
        """The deadline after an interim in silence: the STT is still working, give it its P99, within the cap."""
        grace = self.stt_p99 if self.stt_p99 else _INTERIM_GRACE_SECS
        return max(deadline, now + min(grace, self.cap_left(now)))
