"""Applying the controls' stop-strategy wrappers to the strategies a user aggregator actually runs.

A bot that passes no ``user_turn_strategies`` lets Pipecat choose: its defaults
(Smart Turn) at first, then whatever an STT service recommends in its
``ServiceMetadataFrame`` (Deepgram Flux: external turn detection), which the
aggregator adopts only while the bot passed none. Setting the strategies for
the bot would silently discard that recommendation, so the harness keeps the
params empty and wraps on the way in instead: :class:`TurnStrategyAdvisor`
sits before the user aggregator, recommends the wrapped defaults once the
pipeline starts, and wraps the stop strategies of every recommendation that
passes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipecat.frames.frames import Frame, ServiceMetadataFrame, StartFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.user_turn_strategies import UserTurnStrategies

__all__ = ["HARNESS_SERVICE_NAME", "TurnStrategyAdvisor"]

#: ``service_name`` of the metadata frame that carries the wrapped defaults.
HARNESS_SERVICE_NAME = "pipecat-harness"

StopWrapper = Callable[[list[Any]], list[Any]]


class TurnStrategyAdvisor(FrameProcessor):
    """Wraps the stop strategies of recommended user turn strategies before the aggregator adopts them.

    Args:
        wrap: Returns a stop-strategy list with the controls' wrappers applied.
        defaults: Strategies to recommend at start (Pipecat's defaults, wrapped);
            ``None`` recommends nothing.
    """

    #: Besides the lifecycle frames (the start), the only frame it acts on.
    handled_frames: tuple[type[Frame], ...] = (ServiceMetadataFrame,)

    def __init__(self, wrap: StopWrapper, defaults: UserTurnStrategies | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self._wrap = wrap
        self._defaults = defaults

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Wrap recommendations on their way to the aggregator; recommend the defaults at start."""
        await super().process_frame(frame, direction)
        if (
            isinstance(frame, ServiceMetadataFrame)
            and direction == FrameDirection.DOWNSTREAM
            and frame.user_turn_strategies is not None
        ):
            strategies = frame.user_turn_strategies
            strategies.stop = self._wrap(list(strategies.stop or []))
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._defaults is not None:
            await self.push_frame(ServiceMetadataFrame(service_name=HARNESS_SERVICE_NAME,
                                                       user_turn_strategies=self._defaults))
