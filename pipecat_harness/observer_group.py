"""``ObserverGroup``: the harness's observers behind one Pipecat observer.

Pipecat's worker puts every frame event on every observer's own queue, whether the observer cares or not. The group is
one observer, so one queue put per event; it calls its members in order, each only with the events it asked for, and
keeps one member's failure from silencing the others.
"""

from __future__ import annotations

from collections.abc import Iterable

from loguru import logger
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed, ProcessorSetUp
from pipecat.utils.asyncio.task_manager import BaseTaskManager

__all__ = ["ObserverGroup"]


def _overrides(observer: BaseObserver, method: str) -> bool:
    return getattr(type(observer), method) is not getattr(BaseObserver, method)


class ObserverGroup(BaseObserver):
    """Observers that share one Pipecat observer queue, called in the order given."""

    def __init__(self, observers: Iterable[BaseObserver]) -> None:
        self.members = list(observers)
        super().__init__()
        self._push = [m for m in self.members if _overrides(m, "on_push_frame")]
        self._read_push_needs()
        self._processed = [m for m in self.members if _overrides(m, "on_process_frame")]
        self._setup = [m for m in self.members if _overrides(m, "on_processor_setup")]
        self._started = [m for m in self.members if _overrides(m, "on_pipeline_started")]

    def _read_push_needs(self) -> None:
        self._every_push: list[BaseObserver] = [m for m in self._push if m.observe_every_push]
        self._observe_every_push = bool(self._every_push)

    async def setup(self, task_manager: BaseTaskManager) -> None:
        """Set up every member; read again which ones observe every push (that may change until the call starts)."""
        self._read_push_needs()
        await super().setup(task_manager)
        for member in self.members:
            await member.setup(task_manager)

    async def cleanup(self) -> None:
        """Clean up every member, even when one of them fails."""
        await super().cleanup()
        for member in self.members:
            try:
                await member.cleanup()
            except Exception as exc:
                logger.opt(exception=True).error(f"observer {member} failed to clean up: {exc}")

    async def on_push_frame(self, data: FramePushed) -> None:
        """Pass a push to the members that observe it."""
        for member in self._push if data.first_push else self._every_push:
            try:
                await member.on_push_frame(data)
            except Exception as exc:
                logger.opt(exception=True).error(f"observer {member} failed on {data.frame}: {exc}")

    async def on_process_frame(self, data: FrameProcessed) -> None:
        """Pass a processed frame to the members that observe processing."""
        for member in self._processed:
            try:
                await member.on_process_frame(data)
            except Exception as exc:
                logger.opt(exception=True).error(f"observer {member} failed on {data.frame}: {exc}")

    async def on_processor_setup(self, data: ProcessorSetUp) -> None:
        """Pass a processor's setup timing to the members that observe it."""
        for member in self._setup:
            await member.on_processor_setup(data)

    async def on_pipeline_started(self) -> None:
        """Tell the members the pipeline has started."""
        for member in self._started:
            await member.on_pipeline_started()
