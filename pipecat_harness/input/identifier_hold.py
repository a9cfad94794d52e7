"""``IdentifierHoldStopStrategy``: keep a user turn open while it ends mid-identifier.

In Pipecat 1.14 the user aggregator ends a turn when one of its stop
strategies fires ``on_user_turn_inference_triggered`` / ``on_user_turn_stopped``
(what ``trigger_user_turn_stopped()`` emits). This wrapper sits in the stop
strategy list in place of the configured strategy (speech timeout, Smart Turn,
external/Flux...), lets it decide as usual, and intercepts those two events:

* the turn text does not end in an open identifier: the events pass through at
  once (no added delay);
* it does: they are held, and a timer of ``extra_wait_secs`` is armed. The
  aggregator keeps collecting transcripts while the turn is open, so the
  continuation lands in the same user message. Resumed speech (VAD start,
  interim or final transcript) cancels the timer; when the wrapped strategy
  ends the turn again the merged text is re-checked: complete -> released
  ("merged"), still open -> held again within ``max_hold_secs``;
* the timer expires, or the total hold reaches ``max_hold_secs``: the held
  events are released.

The controller's ``user_turn_stop_timeout`` watchdog keeps running underneath:
keep ``extra_wait_secs`` plus the wrapped strategy's own delay below it, or
the watchdog ends the turn first (recorded as ``released`` with reason
``turn_stopped_elsewhere``). A wrapped strategy that raises is logged and
recorded, and a fallback timer ends the turn, so no turn is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InterimTranscriptionFrame,
    ProposedUserStartedSpeakingFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy, UserTurnStoppedParams

from pipecat_harness.input.endings import HoldDecision, hold_decision
from pipecat_harness.input.identifier_formats import IdentifierHoldConfig

__all__ = ["DecisionSink", "IdentifierHoldStopStrategy"]

DecisionSink = Callable[[str, dict[str, Any]], Any]
"""Receives ``(action, evidence)`` for every hold, resume, merge and release."""

_EVIDENCE_CHARS = 240
#: Signs that the caller is speaking again: local VAD, an STT's own turn detection (Flux), transcripts.
_RESUMED_SPEECH = (
    VADUserStartedSpeakingFrame,
    UserStartedSpeakingFrame,
    ProposedUserStartedSpeakingFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
)


class IdentifierHoldStopStrategy(BaseUserTurnStopStrategy):
    """Delay the wrapped stop strategy's turn end while the text ends in an open identifier.

    Args:
        inner: The stop strategy that decides turn ends (used unchanged).
        config: Ending rules, additional wait and maximum hold.
        on_decision: Called with ``(action, evidence)`` for each decision.
        fallback_stop_secs: If ``inner`` raises, the turn ends this long after
            the caller went quiet (the hold still applies).
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.
    """

    def __init__(
        self,
        inner: BaseUserTurnStopStrategy,
        *,
        config: IdentifierHoldConfig | None = None,
        on_decision: DecisionSink | None = None,
        fallback_stop_secs: float = 0.8,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(inner, BaseUserTurnStopStrategy):
            raise TypeError(f"inner must be a BaseUserTurnStopStrategy, got {type(inner).__name__}")
        self._inner = inner
        self._config = config or IdentifierHoldConfig()
        self._on_decision = on_decision
        self._fallback_stop_secs = fallback_stop_secs
        self._segments: list[str] = []
        self._pending_inference = False
        self._pending_stop: UserTurnStoppedParams | None = None
        self._holding = False
        self._hold_since: float | None = None
        self._held_secs = 0.0
        self._holds = 0
        self._resume_recorded = False
        self._last_signal_at: float | None = None
        self._timer: asyncio.Task[None] | None = None
        self._vad_speaking = False
        self._inner_failed = False
        self._fallback_timer: asyncio.Task[None] | None = None
        inner.add_event_handler("on_push_frame", self._inner_push_frame)
        inner.add_event_handler("on_broadcast_frame", self._inner_broadcast_frame)
        inner.add_event_handler("on_user_turn_inference_triggered", self._inner_inference_triggered)
        inner.add_event_handler("on_user_turn_speculation_cancelled", self._inner_speculation_cancelled)
        inner.add_event_handler("on_user_turn_stopped", self._inner_turn_stopped)

    @property
    def inner(self) -> BaseUserTurnStopStrategy:
        """The wrapped strategy."""
        return self._inner

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
        return " ".join(s for s in self._segments if s)

    @property
    def resolves_proposed_turn_stop_frames(self) -> bool:
        """Whatever the wrapped strategy does with proposed turn stops."""
        return self._inner.resolves_proposed_turn_stop_frames

    async def setup(self, setup: FrameProcessorSetup) -> None:  # type: ignore[override]  # as Pipecat's base
        """Set up this strategy and the wrapped one."""
        await super().setup(setup)
        await self._inner.setup(setup)

    async def cleanup(self) -> None:
        """Cancel timers and clean up the wrapped strategy."""
        await super().cleanup()
        await self._cancel_timers()
        await self._inner.cleanup()

    async def handle_user_turn_started(self) -> None:
        """Start a fresh turn: no text, no hold."""
        await self._reset_turn()
        await self._call_inner("handle_user_turn_started")

    async def handle_user_turn_stopped(self) -> None:
        """The turn ended; if it ended while held, something else ended it (e.g. the watchdog)."""
        if self._holding:
            self._decide_record("released", self._evaluate(), reason="turn_stopped_elsewhere")
        await self._reset_turn()
        await self._call_inner("handle_user_turn_stopped")

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Track the turn text and resumed speech, then let the wrapped strategy decide."""
        if isinstance(frame, TranscriptionFrame):
            self._segments.append(frame.text or "")
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._vad_speaking = True
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._vad_speaking = False

        if isinstance(frame, _RESUMED_SPEECH):
            await self._on_caller_activity(frame)
        elif isinstance(frame, VADUserStoppedSpeakingFrame) and self._holding and self._timer is None:
            # The caller resumed and went quiet again; if the wrapped strategy
            # does not end the turn again, the held end is released anyway.
            self._arm_timer(self._remaining_wait(), "wait_expired")

        if self._inner_failed and (
            isinstance(frame, VADUserStoppedSpeakingFrame)
            or (isinstance(frame, TranscriptionFrame) and not self._vad_speaking)
        ):
            self._arm_fallback()

        try:
            return await self._inner.process_frame(frame)
        except Exception as exc:  # a broken strategy must not lose the turn
            self._fail(exc, f"process_frame({type(frame).__name__})")
            if isinstance(frame, VADUserStoppedSpeakingFrame) or (
                isinstance(frame, TranscriptionFrame) and not self._vad_speaking
            ):
                self._arm_fallback()
            return ProcessFrameResult.CONTINUE

    # --- events of the wrapped strategy ---------------------------------------------------------------

    async def _inner_push_frame(
        self, _: BaseUserTurnStopStrategy, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        await self.push_frame(frame, direction)

    async def _inner_broadcast_frame(self, _: BaseUserTurnStopStrategy, frame_cls: type[Frame], **kwargs: Any) -> None:
        await self.broadcast_frame(frame_cls, **kwargs)

    async def _inner_speculation_cancelled(self, _: BaseUserTurnStopStrategy) -> None:
        await self.trigger_user_turn_speculation_cancelled()

    async def _inner_inference_triggered(
        self, _: BaseUserTurnStopStrategy, speculation: UserTurnSpeculation | None = None
    ) -> None:
        if speculation is not None:
            # Speculative inference answers nothing until the turn is confirmed.
            await self.trigger_user_turn_inference_triggered(speculation=speculation)
            return
        self._pending_inference = True
        await self._on_turn_end_signal()

    async def _inner_turn_stopped(self, _: BaseUserTurnStopStrategy, params: UserTurnStoppedParams) -> None:
        self._pending_stop = params
        await self._on_turn_end_signal()

    # --- hold logic -----------------------------------------------------------------------------------

    async def _on_turn_end_signal(self) -> None:
        self._last_signal_at = self._now()
        if self._fallback_timer is not None:
            await self._cancel(self._fallback_timer)
            self._fallback_timer = None
        if self._timer is not None:
            return  # already holding this end; the timer or the caller decides
        decision = self._evaluate()
        if not decision.hold:
            await self._release("merged" if self._holding else None, decision, reason="complete")
            return
        wait = self._remaining_wait()
        if wait <= 0:
            await self._release("released", decision, reason="max_hold")
            return
        if not self._holding:
            self._holding = True
            self._hold_since = self._now()
        self._holds += 1
        self._resume_recorded = False
        self._decide_record("held", decision, wait_ms=round(wait * 1000))
        self._arm_timer(wait, "wait_expired")

    async def _on_caller_activity(self, frame: Frame) -> None:
        if self._timer is None:
            return
        await self._cancel(self._timer)
        self._timer = None
        if self._holding and not self._resume_recorded:
            self._resume_recorded = True
            self._decide_record("resumed", self._evaluate(), signal=type(frame).__name__)

    def _evaluate(self) -> HoldDecision:
        text = self.turn_text
        if not text.strip():
            return HoldDecision(False, "nothing transcribed", "empty")
        try:
            return hold_decision(text, self._config)
        except Exception as exc:  # the rules must never cost a turn
            logger.exception(f"{self}: ending rules failed: {exc}")
            return HoldDecision(False, f"ending rules failed: {exc}", "error")

    def _remaining_wait(self) -> float:
        held = self._held_secs + (self._now() - self._hold_since if self._hold_since is not None else 0.0)
        return max(0.0, min(self._config.extra_wait_secs, self._config.max_hold_secs - held))

    def _arm_timer(self, wait: float, reason: str) -> None:
        self._timer = self.create_task(self._hold_timer(wait, reason), "identifier_hold_timer")

    async def _hold_timer(self, wait: float, reason: str) -> None:
        try:
            await asyncio.sleep(wait)
        except asyncio.CancelledError:
            return
        self._timer = None
        if self._holding:
            remaining = self._remaining_wait()
            await self._release("released", self._evaluate(), reason="max_hold" if remaining <= 0 else reason)

    async def _release(self, action: str | None, decision: HoldDecision, *, reason: str) -> None:
        """Forward the held turn end; ``action`` is recorded when a hold was in progress."""
        if self._timer is not None and self._timer is not asyncio.current_task():
            await self._cancel(self._timer)
        self._timer = None
        if action is not None:
            self._decide_record(action, decision, reason=reason)
        if self._hold_since is not None:
            self._held_secs += self._now() - self._hold_since
        self._holding = False
        self._hold_since = None
        inference, stop = self._pending_inference, self._pending_stop
        self._pending_inference, self._pending_stop = False, None
        if inference:
            await self.trigger_user_turn_inference_triggered()
        if stop is not None:
            await self.trigger_user_turn_finalized(
                enable_user_speaking_frames=stop.enable_user_speaking_frames,
                confirms_speculation=stop.confirms_speculation,
            )
        elif not inference:
            # Released with nothing stashed (the wrapped strategy never fired): end the turn ourselves.
            await self.trigger_user_turn_stopped()

    # --- failure handling -----------------------------------------------------------------------------

    def _fail(self, exc: Exception, where: str) -> None:
        logger.exception(f"{self}: wrapped {type(self._inner).__name__}.{where} raised: {exc}")
        if not self._inner_failed:
            self._record("error", {"strategy": type(self._inner).__name__, "where": where, "error": repr(exc)})
        self._inner_failed = True

    def _arm_fallback(self) -> None:
        if self._fallback_timer is None and not self._holding:
            self._fallback_timer = self.create_task(self._fallback(), "identifier_hold_fallback")

    async def _fallback(self) -> None:
        try:
            await asyncio.sleep(self._fallback_stop_secs)
        except asyncio.CancelledError:
            return
        self._fallback_timer = None
        if self._vad_speaking or not self.turn_text.strip():
            return
        self._pending_inference = True
        self._pending_stop = UserTurnStoppedParams(enable_user_speaking_frames=True)
        await self._on_turn_end_signal()

    async def _call_inner(self, method: str) -> None:
        try:
            await getattr(self._inner, method)()
        except Exception as exc:
            self._fail(exc, method)

    # --- helpers --------------------------------------------------------------------------------------

    async def _reset_turn(self) -> None:
        await self._cancel_timers()
        self._segments = []
        self._pending_inference = False
        self._pending_stop = None
        self._holding = False
        self._hold_since = None
        self._held_secs = 0.0
        self._holds = 0
        self._resume_recorded = False
        self._last_signal_at = None

    async def _cancel_timers(self) -> None:
        for task in (self._timer, self._fallback_timer):
            if task is not None and task is not asyncio.current_task():
                await self._cancel(task)
        self._timer = None
        self._fallback_timer = None

    async def _cancel(self, task: asyncio.Task[None]) -> None:
        if task is asyncio.current_task() or task.done():
            return
        await self.cancel_task(task)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _decide_record(self, action: str, decision: HoldDecision, **extra: Any) -> None:
        now = self._now()
        held = self._held_secs + (now - self._hold_since if self._hold_since is not None else 0.0)
        # Added wait: how long the turn end came after the wrapped strategy's latest decision.
        # A merge releases on that decision itself (0); an expiry releases a wait after it.
        added = 0.0
        if action in ("merged", "released") and self._last_signal_at is not None:
            added = now - self._last_signal_at
        text = self.turn_text
        evidence: dict[str, Any] = {
            "text": text[-_EVIDENCE_CHARS:],
            "text_chars": len(text),
            "rule": decision.rule,
            "reason": decision.reason,
            "identifier": decision.identifier,
            "domain": self._config.domain,
            "strategy": type(self._inner).__name__,
            "holds": self._holds,
            "held_ms": round(held * 1000),
            "added_wait_ms": round(added * 1000),
            **extra,
        }
        self._record(action, evidence)

    def _record(self, action: str, evidence: dict[str, Any]) -> None:
        if self._on_decision is None:
            return
        try:
            self._on_decision(action, evidence)
        except Exception as exc:  # recording must never break the turn
            logger.warning(f"{self}: recording a decision failed: {exc}")
