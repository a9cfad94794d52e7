"""Where the harness's processors go in a Pipecat pipeline, and how they cost one hop per placement.

Every processor a frame crosses costs a push, a processing call and a queue put per observer, and most frames are audio
no control touches. So the processors at one placement sit in the pipeline as one :class:`PlacementGroup`, which
observers see as one processor. A member in direct mode may name the frames it acts on (``handled_frames``, or
``handled_data_frames`` for data frames only) so that others pass it by, and may only look at them
(``inspect_frame(frame, direction)``), so the group calls it and moves on; :data:`LIFECYCLE_FRAMES` reach every member.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from pipecat.frames.frames import (
    CancelFrame,
    DataFrame,
    EndFrame,
    Frame,
    FrameProcessorPauseFrame,
    FrameProcessorPauseUrgentFrame,
    FrameProcessorResumeFrame,
    FrameProcessorResumeUrgentFrame,
    InterruptionFrame,
    LLMContextUserTurnFrame,
    StartFrame,
    StopFrame,
)
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed, ProcessorSetUp
from pipecat.pipeline.base_pipeline import BasePipeline
from pipecat.pipeline.worker_observer import WorkerObserver
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator, LLMUserAggregator
from pipecat.processors.frame_processor import FrameCallback, FrameDirection, FrameProcessor, FrameProcessorSetup
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.utils.asyncio.task_manager import BaseTaskManager
from pipecat.utils.errors import ErrorCategory

from pipecat_harness._pipecat import (
    cleanup_members,
    in_direct_mode,
    mark_setup_finished,
    mark_setup_started,
    set_neighbours,
    setup_members,
    worker_observers,
)
from pipecat_harness.control import Placement
from pipecat_harness.decisions import DecisionLog

__all__ = ["ANCHORS", "LIFECYCLE_FRAMES", "PlacementGroup", "TurnBoundaryProcessor", "flatten", "insert_placed"]

#: Per placement: the processor type it is anchored to, and whether it goes after it.
ANCHORS: dict[Placement, tuple[type[FrameProcessor], bool]] = {
    Placement.BEFORE_USER_AGGREGATOR: (LLMUserAggregator, False),
    Placement.BEFORE_LLM: (LLMUserAggregator, True),
    Placement.AFTER_OUTPUT_TRANSPORT: (BaseOutputTransport, True),
    Placement.AFTER_ASSISTANT_AGGREGATOR: (LLMAssistantAggregator, True),
}

#: Frames that reach every member of a group: Pipecat's base processor acts on them, or they end the pipeline.
LIFECYCLE_FRAMES: tuple[type[Frame], ...] = (StartFrame, EndFrame, StopFrame, CancelFrame, InterruptionFrame,
                                              FrameProcessorPauseFrame, FrameProcessorPauseUrgentFrame,
                                              FrameProcessorResumeFrame, FrameProcessorResumeUrgentFrame)


class _Acts:
    """Which frames one member acts on, and whether it only inspects them."""

    __slots__ = ("data_only", "frames", "inspects")

    def __init__(self, member: FrameProcessor) -> None:
        self.data_only = getattr(member, "handled_frames", None) is None
        frames = getattr(member, "handled_data_frames" if self.data_only else "handled_frames", None)
        # A queueing member is never passed by: a frame going past it would overtake its queue.
        direct = frames is not None and in_direct_mode(member)
        self.frames: tuple[type[Frame], ...] | None = tuple(frames or ()) if direct else None
        self.inspects = self.frames is not None and callable(getattr(member, "inspect_frame", None))

    def on(self, kind: type[Frame]) -> bool:
        if self.frames is None or issubclass(kind, LIFECYCLE_FRAMES):
            return True
        return (self.data_only and not issubclass(kind, DataFrame)) or issubclass(kind, self.frames)


class _Route(NamedTuple):
    """How a group handles one kind of frame in one direction (never empty, so always true)."""

    inspectors: tuple[Any, ...]
    entry: FrameProcessor | None


class TurnBoundaryProcessor(FrameProcessor):
    """Advances the call's turn counter when a user turn is submitted (and starts the decision log's clock).

    It sits right after the user aggregator, so it sees the ``LLMContextUserTurnFrame`` before the ``LLMContextFrame``
    that runs the model: every decision of the model's turn carries the right turn id.
    """

    handled_frames: tuple[type[Frame], ...] = (LLMContextUserTurnFrame,)

    def __init__(self, on_turn: Callable[[str], None], *, decisions: DecisionLog | None = None, **kwargs: Any) -> None:
        # It only inspects frames: processing them in the pusher's task saves a queue hop per frame.
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self._on_turn = on_turn
        self._decisions = decisions

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Forward every frame; note submitted user turns."""
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._decisions is not None:
            self._decisions.start()
        await self.inspect_frame(frame, direction)
        await self.push_frame(frame, direction)

    async def inspect_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Note a submitted user turn (the frame goes on unchanged)."""
        if isinstance(frame, LLMContextUserTurnFrame):
            self._on_turn(frame.text)


class _BoundaryObserver(BaseObserver):
    """The worker's observer as a group's members see it: only pushes that leave the group reach it."""

    def __init__(self, observer: BaseObserver, members: Sequence[FrameProcessor]) -> None:
        super().__init__()
        self._observer = observer
        self._inside = frozenset(id(member) for member in members)

    async def setup(self, task_manager: BaseTaskManager) -> None:
        """Nothing to set up: the worker sets up the observer this one passes to."""

    async def on_push_frame(self, data: FramePushed) -> None:
        if id(data.destination) not in self._inside:
            await self._observer.on_push_frame(data)

    async def on_process_frame(self, data: FrameProcessed) -> None:
        """Keep a member's processing to the group (its pushes out are what observers see)."""

    async def on_processor_setup(self, data: ProcessorSetUp) -> None:
        await self._observer.on_processor_setup(data)


class PlacementGroup(BasePipeline):
    """The harness's processors at one ``placement`` (``members`` in pipeline order), as one processor of the pipeline.

    Members pass frames to each other directly and the outer members to the group's neighbours, so each member's
    ``process_frame``, ``push_frame``, ``previous`` and ``next`` work as if it stood in the pipeline itself.
    """

    #: Whether a handler listens to the group's own pushes (then it pushes every frame as Pipecat does).
    _push_listened = False

    def __init__(self, placement: Placement, members: Iterable[FrameProcessor], **kwargs: Any) -> None:
        kwargs.setdefault("name", f"harness:{placement.value}")
        # Frames go straight to a member: the group itself never queues nor processes one.
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self.placement = placement
        self.members = list(members)
        if not self.members:
            raise ValueError(f"a placement group for {placement.value} needs at least one processor")
        for upstream, downstream in zip(self.members, self.members[1:], strict=False):
            upstream.link(downstream)
        self._acts = [_Acts(member) for member in self.members]
        # Per frame class and direction: the members that inspect it in passing, then the member it enters.
        self._downstream_routes: dict[type[Frame], _Route] = {}
        self._upstream_routes: dict[type[Frame], _Route] = {}
        self._observer: BaseObserver | None = None
        self._clock: Any = None
        # The worker's observers, and whether one observes repeated pushes (read again when one is added).
        self._watchers: list[BaseObserver] | None = None
        self._watched = (-1, True)

    def add_event_handler(self, event_name: str, handler: Any) -> None:
        """Add an event handler; one on the group's own pushes makes it push every frame as Pipecat does."""
        super().add_event_handler(event_name, handler)
        self._push_listened = self._push_listened or event_name in ("on_before_push_frame", "on_after_push_frame")

    def __repr__(self) -> str:
        return f"PlacementGroup({self.placement.value}: {', '.join(type(m).__name__ for m in self.members)})"

    def _route(self, direction: FrameDirection, kind: type[Frame]) -> _Route:
        order = range(len(self.members))[:: -1 if direction == FrameDirection.UPSTREAM else 1]
        lifecycle = issubclass(kind, LIFECYCLE_FRAMES)
        inspectors: list[Any] = []
        entry: FrameProcessor | None = None
        for i in order:
            if not self._acts[i].on(kind):
                continue
            if self._acts[i].inspects and not lifecycle:
                inspectors.append(self.members[i].inspect_frame)  # type: ignore[attr-defined]
                continue
            entry = self.members[i]
            break
        route = _Route(tuple(inspectors), entry)
        (self._downstream_routes if direction == FrameDirection.DOWNSTREAM else self._upstream_routes)[kind] = route
        return route

    @property
    def processors(self) -> list[FrameProcessor]:
        """The members."""
        return self.members

    @property
    def entry_processors(self) -> list[FrameProcessor]:
        """The first member."""
        return self.members[:1]

    def processors_with_metrics(self) -> list[FrameProcessor]:
        """Members that generate metrics (as a ``Pipeline`` reports its processors)."""
        return [found for member in self.members
                for found in [*([member] if member.can_generate_metrics() else []), *member.processors_with_metrics()]]

    def link(self, processor: FrameProcessor) -> None:
        """Link the group, and so its last member, to the next processor."""
        super().link(processor)
        set_neighbours(self.members[-1], following=processor)

    def _setup_started(self) -> None:
        # Hold the members' StartFrame with the group's: a frame may reach a member before the group sets it up.
        mark_setup_started(self, base=True)
        for member in self.members:
            mark_setup_started(member)

    async def setup(self, setup: FrameProcessorSetup) -> None:  # type: ignore[override]  # as Pipecat's base
        """Set the members up, reporting to the worker's observer only what leaves the group."""
        await super().setup(setup)
        mark_setup_finished(self)
        self._observer, self._clock = setup.observer, setup.clock
        self._watchers = worker_observers(setup.observer) if isinstance(setup.observer, WorkerObserver) else None
        set_neighbours(self.members[0], previous=self.previous)
        set_neighbours(self.members[-1], following=self.next)
        inner = setup
        if setup.observer is not None:
            inner = copy.copy(setup)  # a shallow copy, not dataclasses.replace: that reads deprecated fields
            inner.observer = _BoundaryObserver(setup.observer, self.members)
        await setup_members(self, self.members, inner)

    async def cleanup(self) -> None:
        """Clean up the group and its members."""
        await super().cleanup()
        await cleanup_members(self, self.members)

    async def queue_frame(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM,
                          callback: FrameCallback | None = None) -> None:
        """Let the members that inspect a frame see it, hand it to the next one that acts on it, or push it on."""
        if callback is not None:  # a frame that reports back runs through the members as in a pipeline
            first = self.members[0] if direction == FrameDirection.DOWNSTREAM else self.members[-1]
            await first.queue_frame(frame, direction, callback)
            return
        downstream = direction is FrameDirection.DOWNSTREAM
        routes = self._downstream_routes if downstream else self._upstream_routes
        route = routes.get(type(frame)) or self._route(direction, type(frame))
        for inspect in route.inspectors:
            await inspect(frame, direction)
        if route.entry is not None:
            await route.entry.queue_frame(frame, direction)
            return
        # A frame no member acts on goes to the group's neighbour, observed as any push (as a repeated one). What
        # Pipecat's ``push_frame`` would add is left out: the group's own push events (unless listened to) and a
        # trace-log line formatted for every frame, whether or not trace logging is on.
        if self._push_listened:
            await self.push_frame(frame, direction)
            return
        destination = self.next if downstream else self.previous
        if destination is None:
            return
        try:
            observer = self._observer
            if observer is not None and self._repeats_watched():
                pushed = FramePushed(self, destination, frame, direction, self._clock.get_time())
                await observer.on_push_frame(pushed)
            await destination.queue_frame(frame, direction)
        except Exception as exc:  # as Pipecat's push: the cause downstream cannot be attributed
            await self.push_error(error_msg=f"Uncaught exception: {exc}", exception=exc, category=ErrorCategory.UNKNOWN)

    def _repeats_watched(self) -> bool:
        watchers = self._watchers
        if watchers is None:  # not a worker's observer: it may want every push
            return True
        if self._watched[0] != len(watchers):
            self._watched = (len(watchers), any(o.observe_every_push for o in watchers))
        return self._watched[1]


def flatten(processors: Iterable[FrameProcessor]) -> list[FrameProcessor]:
    """The processors with every :class:`PlacementGroup` replaced by its members."""
    return [m for p in processors for m in (p.members if isinstance(p, PlacementGroup) else [p])]


def insert_placed(processors: Sequence[FrameProcessor], placed: dict[Placement, list[FrameProcessor]], owners: str, *,
                  grouped: bool = True) -> list[FrameProcessor]:
    """``processors`` with each placement's processors inserted at its anchor, one group per placement.

    With ``grouped`` off, the processors stand in the list one by one (``scripts/bench_pipeline.py`` compares).

    Raises:
        ValueError: A placement with processors has no anchor in ``processors``.
    """
    result = list(processors)
    for placement, extra in placed.items():
        if not extra:
            continue
        anchor_type, after = ANCHORS[placement]
        index = next((i for i, p in enumerate(result) if isinstance(p, anchor_type)), None)
        if index is None:
            missing = f"the pipeline has no {anchor_type.__name__}"
            raise ValueError(f"cannot place {placement.value} processors for {owners}: {missing}")
        position = index + 1 if after else index
        result[position:position] = [PlacementGroup(placement, extra)] if grouped else extra
    return result
