"""``WrappedStopStrategy``: a user-turn stop strategy that runs another one as if the controller held it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, TranscriptionFrame, VADUserStoppedSpeakingFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy, UserTurnStoppedParams

__all__ = ["WrappedStopStrategy"]


class WrappedStopStrategy(BaseUserTurnStopStrategy):
    """Runs ``inner`` (a stop strategy, else ``TypeError``) unchanged and hands its turn-end events to the subclass.

    ``on_failure`` gets ``(action, evidence)`` the first time ``inner`` raises; from then on a turn ends
    ``fallback_stop_secs`` after the caller went quiet.
    """

    def __init__(self, inner: BaseUserTurnStopStrategy, *,
                 on_failure: Callable[[str, dict[str, Any]], Any] | None = None, fallback_stop_secs: float = 0.8,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(inner, BaseUserTurnStopStrategy):
            raise TypeError(f"inner must be a BaseUserTurnStopStrategy, got {type(inner).__name__}")
        self._inner = inner
        self._on_failure = on_failure
        self._fallback_stop_secs = fallback_stop_secs
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
    def resolves_proposed_turn_stop_frames(self) -> bool:
        """Whatever the wrapped strategy does with proposed turn stops."""
        return self._inner.resolves_proposed_turn_stop_frames

    @property
    def wait_for_transcript(self) -> bool:
        """The wrapped strategy's flag (Pipecat's realtime mode flips it through the wrapper)."""
        return bool(getattr(self._inner, "wait_for_transcript", False))

    @wait_for_transcript.setter
    def wait_for_transcript(self, value: bool) -> None:
        if hasattr(type(self._inner), "wait_for_transcript"):
            self._inner.wait_for_transcript = value  # type: ignore[attr-defined]

    async def setup(self, setup: FrameProcessorSetup) -> None:  # type: ignore[override]  # as Pipecat's base
        """Set up this strategy and the wrapped one."""
        await super().setup(setup)
        await self._inner.setup(setup)

    async def cleanup(self) -> None:
        """Cancel timers and clean up the wrapped strategy."""
        await super().cleanup()
        await self._cancel_timers()
        await self._inner.cleanup()

    async def process_inner(self, frame: Frame, *, speaking: bool) -> ProcessFrameResult | None:
        """Let the wrapped strategy see ``frame``; once it has failed, a fallback timer armed in silence ends turns."""
        quiet = isinstance(frame, VADUserStoppedSpeakingFrame) or (
            isinstance(frame, TranscriptionFrame) and not speaking)
        if self._inner_failed and quiet:
            self._arm_fallback()
        try:
            return await self._inner.process_frame(frame)
        except Exception as exc:  # a broken strategy must not lose the turn
            self._fail(exc, f"process_frame({type(frame).__name__})")
            if quiet:
                self._arm_fallback()
            return ProcessFrameResult.CONTINUE

    async def call_inner(self, method: str) -> None:
        """Call one of the wrapped strategy's turn hooks (``handle_user_turn_started``...), surviving a failure."""
        try:
            await getattr(self._inner, method)()
        except Exception as exc:
            self._fail(exc, method)

    async def on_inner_inference_triggered(self) -> None:
        """The wrapped strategy asked for inference (not speculatively); forwarded as is by default."""
        await self.trigger_user_turn_inference_triggered()

    async def on_inner_turn_stopped(self, params: UserTurnStoppedParams) -> None:
        """The wrapped strategy ended the turn; forwarded as is by default."""
        await self.trigger_user_turn_finalized(enable_user_speaking_frames=params.enable_user_speaking_frames,
                                               confirms_speculation=params.confirms_speculation)

    async def on_fallback_turn_end(self) -> None:
        """The fallback timer fired (the wrapped strategy is broken); ends the turn by default."""
        await self.trigger_user_turn_stopped()

    def fallback_allowed(self) -> bool:
        """Whether the fallback timer may be armed now (a subclass may be holding the turn itself)."""
        return True

    def fallback_wanted(self) -> bool:
        """Whether the fallback, once due, should still end the turn."""
        return True

    async def _cancel_timers(self) -> None:
        """Cancel this wrapper's timers (a subclass adds its own)."""
        await self.cancel_fallback()

    async def cancel_fallback(self) -> None:
        """Stop a pending fallback timer (the turn end it stood in for has come)."""
        if self._fallback_timer is not None:
            await self._cancel(self._fallback_timer)
            self._fallback_timer = None

    async def _inner_push_frame(self, _: BaseUserTurnStopStrategy, frame: Frame,
                                direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        await self.push_frame(frame, direction)

    async def _inner_broadcast_frame(self, _: BaseUserTurnStopStrategy, frame_cls: type[Frame], **kwargs: Any) -> None:
        await self.broadcast_frame(frame_cls, **kwargs)

    async def _inner_speculation_cancelled(self, _: BaseUserTurnStopStrategy) -> None:
        await self.trigger_user_turn_speculation_cancelled()

    async def _inner_inference_triggered(self, _: BaseUserTurnStopStrategy,
                                         speculation: UserTurnSpeculation | None = None) -> None:
        if speculation is not None:
            # Speculative inference answers nothing until the turn is confirmed.
            await self.trigger_user_turn_inference_triggered(speculation=speculation)
            return
        await self.on_inner_inference_triggered()

    async def _inner_turn_stopped(self, _: BaseUserTurnStopStrategy, params: UserTurnStoppedParams) -> None:
        await self.on_inner_turn_stopped(params)

    def _fail(self, exc: Exception, where: str) -> None:
        logger.exception(f"{self}: wrapped {type(self._inner).__name__}.{where} raised: {exc}")
        if not self._inner_failed and self._on_failure is not None:
            try:
                self._on_failure("error", {"strategy": type(self._inner).__name__, "where": where, "error": repr(exc)})
            except Exception as sink_exc:  # recording must never break the turn
                logger.warning(f"{self}: recording a failure failed: {sink_exc}")
        self._inner_failed = True

    def _arm_fallback(self) -> None:
        if self._fallback_timer is None and self.fallback_allowed():
            self._fallback_timer = self.create_task(self._fallback(), "wrapped_strategy_fallback")

    async def _fallback(self) -> None:
        try:
            await asyncio.sleep(self._fallback_stop_secs)
        except asyncio.CancelledError:
            return
        self._fallback_timer = None
        if self.fallback_wanted():
            await self.on_fallback_turn_end()

    async def _cancel(self, task: asyncio.Task[None]) -> None:
        if task is asyncio.current_task() or task.done():
            return
        await self.cancel_task(task)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()
