"""Applying the controls' stop-strategy wrappers to the strategies a user aggregator actually runs.

A bot that passes no ``user_turn_strategies`` lets Pipecat choose: its defaults, then what an STT service recommends in
a ``ServiceMetadataFrame`` (adopted only while the bot passed none). Setting strategies for the bot would discard that
recommendation, so :class:`TurnStrategyAdvisor`, before the user aggregator, recommends the wrapped defaults at start
and wraps the stop strategies of every recommendation that passes it.
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
    """Wraps (with ``wrap``) the stop strategies of recommended user turn strategies before the aggregator adopts them.

    ``defaults`` are the strategies to recommend at start (Pipecat's defaults, wrapped; ``None``: nothing).
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
        strategies = frame.user_turn_strategies if isinstance(frame, ServiceMetadataFrame) else None
        if strategies is not None and direction == FrameDirection.DOWNSTREAM:
            strategies.stop = self._wrap(list(strategies.stop or []))
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._defaults is not None:
            recommended = ServiceMetadataFrame(service_name=HARNESS_SERVICE_NAME, user_turn_strategies=self._defaults)
            await self.push_frame(recommended)
