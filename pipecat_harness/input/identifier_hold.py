"""``IdentifierHoldStopStrategy``: keep a user turn open while it ends mid-identifier.

It holds the wrapped strategy's turn end for ``extra_wait_secs`` when the text ends in an open identifier, so
the continuation lands in the same user message; once the caller resumes, the wrapped strategy's next decision
is re-checked. A turn released mid-identifier is remembered, so its continuation is not held again.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InterimTranscriptionFrame,
    LLMContextAssistantTurnFrame,
    ProposedUserStartedSpeakingFrame,
    ProposedUserStoppedSpeakingFrame,
    STTMetadataFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy, UserTurnStoppedParams

from pipecat_harness.input.endings import HoldDecision, continues_identifier, hold_decision
from pipecat_harness.input.hold_budget import WATCHDOG_MARGIN_SECS, check_hold_budget
from pipecat_harness.input.identifier_formats import IdentifierHoldConfig
from pipecat_harness.input.slots import expecting
from pipecat_harness.input.wrapped_strategy import WrappedStopStrategy

__all__ = ["DecisionSink", "HoldTiming", "IdentifierHoldStopStrategy"]

_EVIDENCE_CHARS = 240
#: How long an interim keeps the timer from firing when the STT announced no P99.
_INTERIM_GRACE_SECS = 0.5

#: Receives ``(action, evidence)`` for every hold, resume, merge and release.
DecisionSink = Callable[[str, dict[str, Any]], Any]

#: The caller is speaking again: local VAD, or an STT's own turn detection (Flux).
_SPEECH_STARTED = (VADUserStartedSpeakingFrame, UserStartedSpeakingFrame, ProposedUserStartedSpeakingFrame)
_SPEECH_STOPPED = (VADUserStoppedSpeakingFrame, UserStoppedSpeakingFrame, ProposedUserStoppedSpeakingFrame)


class HoldTiming:
    """The clock readings one hold needs (event-loop times), with its waits and the watchdog, when known.

    Only held silence counts toward ``max_hold_secs``; a release comes no sooner than the STT's P99 after the last
    VAD stop, and no later than the aggregator's watchdog.
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


class IdentifierHoldStopStrategy(WrappedStopStrategy):
    """Delay the wrapped stop strategy's turn end while the text ends in an open identifier.

    ``on_decision`` gets ``(action, evidence)`` for each decision. Given the aggregator's watchdog
    (``user_turn_stop_timeout``), a hold that cannot fit inside it is refused (``HoldBudgetError``), and a hold ends
    before it. ``TypeError``: ``inner`` is not a stop strategy.
    """

    def __init__(self, inner: BaseUserTurnStopStrategy, *, config: IdentifierHoldConfig | None = None,
                 on_decision: DecisionSink | None = None, fallback_stop_secs: float = 0.8,
                 user_turn_stop_timeout: float | None = None, **kwargs: Any) -> None:
        self._config = config or IdentifierHoldConfig()
        self._base_config = self._config
        self._context: Any = None
        self._sink = on_decision
        super().__init__(inner, on_failure=self._record, fallback_stop_secs=fallback_stop_secs, **kwargs)
        if user_turn_stop_timeout is not None:
            check_hold_budget(inner, self._config.extra_wait_secs, user_turn_stop_timeout)
        self._timing = HoldTiming(self._config, user_turn_stop_timeout)
        self._speaking = False
        self._submitted_open = False
        self._after_open_submission = False
        self._timer: asyncio.Task[None] | None = None
        self._deadline = 0.0
        self._clear_turn_state()

    def _clear_turn_state(self) -> None:
        self._segments: list[str] = []
        self._pending_inference = False
        self._pending_stop: UserTurnStoppedParams | None = None
        self._holding = False
        self._resumed = False
        self._timing.reset_turn()
        self._holds = 0
        self._last_signal_at: float | None = None
        self._continuation_passed = False

    def fit_watchdog(self, user_turn_stop_timeout: float, *, refuse: bool = True) -> None:
        """Learn the aggregator's watchdog, which the hold then ends before (``refuse``: one it cannot fit raises)."""
        if refuse:
            check_hold_budget(self._inner, self._config.extra_wait_secs, user_turn_stop_timeout)
        self._timing.stop_timeout = user_turn_stop_timeout

    def attach_context(self, context: Any) -> None:
        """Read the registered tools' argument schemas from ``context`` (an ``LLMContext``) when a slot is expected."""
        self._context = context

    def expect(self, question: str, tools: Iterable[Mapping[str, Any]] | None = None) -> None:
        """Expect the identifier the agent's last message asks for, in the formats of the tools' ``properties``.

        ``tools`` defaults to the attached context's tools; a question asking for none clears the expectation.
        """
        if tools is None:
            standard = getattr(getattr(self._context, "tools", None), "standard_tools", None) or []
            tools = [t.properties for t in standard if isinstance(t.properties, dict)]
        self._config = expecting(self._base_config, question, tools)

    @property
    def config(self) -> IdentifierHoldConfig:
        """The ending rules and waits in use."""
        return self._config

    @property
    def holding(self) -> bool:
        """Whether a turn end is being held right now."""
        return self._holding

    @property
    def turn_text(self) -> str:
        """Final transcripts of the current turn, joined."""
        return " ".join(s.strip() for s in self._segments if s.strip())

    async def handle_user_turn_started(self) -> None:
        """Start a fresh turn; remember whether the last one was submitted mid-identifier."""
        self._after_open_submission, self._submitted_open = self._submitted_open, False
        await self._reset_turn()
        await self.call_inner("handle_user_turn_started")

    async def handle_user_turn_stopped(self) -> None:
        """The turn ended; if it ended while held, something else ended it (e.g. the watchdog)."""
        if self._holding:
            decision = self._evaluate()
            self._submitted_open = decision.hold
            self._record_decision("released", decision, reason="turn_stopped_elsewhere")
        await self._reset_turn()
        await self.call_inner("handle_user_turn_stopped")

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Track the turn text, speech and STT latency, then let the wrapped strategy decide."""
        if isinstance(frame, STTMetadataFrame):
            self._timing.stt_p99 = frame.ttfs_p99_latency
        elif isinstance(frame, LLMContextAssistantTurnFrame):
            self.expect(frame.text or "")
        if isinstance(frame, (*_SPEECH_STARTED, *_SPEECH_STOPPED, TranscriptionFrame, InterimTranscriptionFrame)):
            self._timing.last_activity = self._now()
        if isinstance(frame, _SPEECH_STARTED):
            await self._on_speech_started(frame)
        elif isinstance(frame, _SPEECH_STOPPED):
            self._speaking = False
            self._timing.last_speech_stop = self._now()
            if self._holding:
                self._timing.silence_started(self._timing.last_speech_stop)
        elif isinstance(frame, TranscriptionFrame):
            self._segments.append(frame.text or "")
            # A final in silence during a hold round releases at once if it completes the identifier.
            if self._holding and not (self._resumed or self._speaking) and not (decision := self._evaluate()).hold:
                await self._release("merged", decision, reason="complete")
        elif isinstance(frame, InterimTranscriptionFrame) and self._timer is not None and not self._speaking:
            # The STT is still working: give it its P99, within the cap.
            self._deadline = self._timing.after_interim(self._now(), self._deadline)
        return await self.process_inner(frame, speaking=self._speaking)

    async def on_inner_inference_triggered(self) -> None:
        """Stash the inference request and decide whether to hold it."""
        self._pending_inference = True
        await self._on_turn_end_signal()

    async def on_inner_turn_stopped(self, params: UserTurnStoppedParams) -> None:
        """Stash the turn end and decide whether to hold it."""
        self._pending_stop = params
        await self._on_turn_end_signal()

    def fallback_allowed(self) -> bool:
        """The fallback stands in for the wrapped strategy's turn end, not for a running hold."""
        return not self._holding

    def fallback_wanted(self) -> bool:
        """A fallback ends a quiet turn that has words in it."""
        return not self._speaking and bool(self.turn_text.strip())

    async def on_fallback_turn_end(self) -> None:
        """Treat the fallback as the wrapped strategy's turn end: the hold still applies."""
        self._pending_inference = True
        self._pending_stop = UserTurnStoppedParams(enable_user_speaking_frames=True)
        await self._on_turn_end_signal()

    async def _on_turn_end_signal(self) -> None:
        """The wrapped strategy decided the turn ended: pass it on, hold it, or re-check a hold."""
        self._last_signal_at = self._now()
        await self.cancel_fallback()
        decision = self._evaluate()
        if not decision.hold:
            await self._release("merged" if self._holding else None, decision, reason="complete")
            return
        if not self._holding and self._after_open_submission and continues_identifier(self.turn_text, self._config):
            # The first part already reached the model; holding its continuation only adds delay.
            action = None if self._continuation_passed else "released"
            self._continuation_passed = True
            await self._release(action, decision, reason="continuation_of_submitted")
            return
        if self._timer is not None:
            return  # this hold round is running; its timer or the caller decides
        await self._start_hold_round(decision)

    async def _start_hold_round(self, decision: HoldDecision) -> None:
        now = self._now()
        slot_open = self._config.expected is not None and decision.rule.startswith(("slot_", "prefix:last_name"))
        wait = self._timing.round_wait(now, self._config.longest_wait_secs if slot_open else None)
        if wait <= 0:
            await self._release("released", decision, reason="max_hold")
            return
        if not self._holding:
            self._holding = True
            if not self._speaking:
                self._timing.silence_started(now)
        self._resumed = False
        self._holds += 1
        self._record_decision("held", decision, wait_ms=round(wait * 1000))
        self._deadline = now + wait
        self._timer = self.create_task(self._hold_timer(), "identifier_hold_timer")

    async def _on_speech_started(self, frame: Frame) -> None:
        self._speaking = True
        if not self._holding:
            return
        self._timing.silence_ended(self._now())
        await self._stop_timer()
        if not self._resumed:
            self._resumed = True
            self._record_decision("resumed", self._evaluate(), signal=type(frame).__name__)

    async def _hold_timer(self) -> None:
        try:
            while True:
                now = self._now()
                due = self._timing.release_due(self._deadline)
                if now >= due - 1e-9:
                    break
                await asyncio.sleep(due - now)
        except asyncio.CancelledError:
            return
        self._timer = None
        if self._holding and not self._speaking:
            reason = "max_hold" if self._timing.cap_left(self._now()) <= 1e-9 else "wait_expired"
            await self._release("released", self._evaluate(), reason=reason)

    async def _release(self, action: str | None, decision: HoldDecision, *, reason: str) -> None:
        """Forward the held turn end; ``action`` is recorded when a hold was in progress."""
        await self._stop_timer()
        self._timing.silence_ended(self._now())
        if action is not None:
            self._record_decision(action, decision, reason=reason)
        self._submitted_open = decision.hold and action == "released" and reason != "continuation_of_submitted"
        self._holding = False
        inference, stop = self._pending_inference, self._pending_stop
        self._pending_inference, self._pending_stop = False, None
        if inference:
            await self.trigger_user_turn_inference_triggered()
        if stop is not None:
            await super().on_inner_turn_stopped(stop)  # forwarded as the wrapped strategy gave it
        elif not inference:
            # Released with nothing stashed (the wrapped strategy never fired): end the turn ourselves.
            await self.trigger_user_turn_stopped()

    def _evaluate(self) -> HoldDecision:
        text = self.turn_text
        if not text.strip():
            return HoldDecision(False, "nothing transcribed", "empty")
        try:
            return hold_decision(text, self._config)
        except Exception as exc:  # the rules must never cost a turn
            logger.exception(f"{self}: ending rules failed: {exc}")
            return HoldDecision(False, f"ending rules failed: {exc}", "error")

    async def _reset_turn(self) -> None:
        await self._cancel_timers()
        self._clear_turn_state()

    async def _stop_timer(self) -> None:
        if self._timer is not None:
            await self._cancel(self._timer)
        self._timer = None

    async def _cancel_timers(self) -> None:
        await self._stop_timer()
        await super()._cancel_timers()

    def _record_decision(self, action: str, decision: HoldDecision, **extra: Any) -> None:
        """Record a hold, resume, merge or release with the turn text and the rule that decided."""
        now, text, last = self._now(), self.turn_text, self._last_signal_at
        # Added wait: how long the turn end came after the wrapped strategy's latest decision.
        added = now - last if action in ("merged", "released") and last is not None else 0.0
        evidence = {"text": text[-_EVIDENCE_CHARS:], "text_chars": len(text), "rule": decision.rule,
                    "reason": decision.reason, "identifier": decision.identifier, "domain": self._base_config.domain,
                    "strategy": type(self._inner).__name__, "holds": self._holds,
                    "held_ms": round(self._timing.held_secs(now) * 1000), "added_wait_ms": round(added * 1000)}
        self._record(action, {**evidence, **extra})

    def _record(self, action: str, evidence: dict[str, Any]) -> None:
        if self._sink is None:
            return
        try:
            self._sink(action, evidence)
        except Exception as exc:  # recording must never break the turn
            logger.warning(f"identifier hold: recording a decision failed: {exc}")
