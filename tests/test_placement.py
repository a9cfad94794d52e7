"""A placement group runs its members on the frames they act on and passes the rest by, in a real Pipecat pipeline."""

from pipecat.frames.frames import (
    BotSpeakingFrame,
    Frame,
    InterruptionFrame,
    StartFrame,
    TextFrame,
    TTSAudioRawFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker_observer import WorkerObserver
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test

from pipecat_harness.control import Placement
from pipecat_harness.placement import PlacementGroup


class Seen(FrameProcessor):
    """Forwards every frame and keeps the kinds it processed."""

    def __init__(self, name: str, *, handled: tuple[type[Frame], ...] | None = None, direct: bool = True) -> None:
        super().__init__(name=name, enable_direct_mode=direct)
        if handled is not None:
            self.handled_frames = handled
        self.kinds: list[str] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.kinds.append(type(frame).__name__)
        await self.push_frame(frame, direction)


class Hops(BaseObserver):
    """Every push, as (frame kind, source name, destination name)."""

    def __init__(self) -> None:
        super().__init__(observe_every_push=True)
        self.hops: list[tuple[str, str, str]] = []

    async def on_push_frame(self, data: FramePushed) -> None:
        self.hops.append((type(data.frame).__name__, data.source.name, data.destination.name))


def _audio() -> TTSAudioRawFrame:
    return TTSAudioRawFrame(audio=b"\0" * 640, sample_rate=16000, num_channels=1)


async def test_members_see_the_frames_they_name_and_every_lifecycle_frame() -> None:
    text_only = Seen("text_only", handled=(TextFrame,))
    everything = Seen("everything")
    after = Seen("after")
    group = PlacementGroup(Placement.BEFORE_LLM, [text_only, everything])
    hops = Hops()
    down, _ = await run_test(
        Pipeline([group, after]),
        frames_to_send=[TextFrame("hello"), _audio(), BotSpeakingFrame(), InterruptionFrame()],
        observers=[hops],
    )
    assert [type(f) for f in down] == [TextFrame, TTSAudioRawFrame, BotSpeakingFrame, InterruptionFrame]
    assert text_only.kinds[0] == StartFrame.__name__
    assert "TextFrame" in text_only.kinds and "InterruptionFrame" in text_only.kinds
    assert "TTSAudioRawFrame" not in text_only.kinds and "BotSpeakingFrame" not in text_only.kinds
    # The next member still gets what the first one passes by, and so does the processor after the group.
    for kind in ("TextFrame", "TTSAudioRawFrame", "BotSpeakingFrame", "InterruptionFrame"):
        assert kind in everything.kinds and kind in after.kinds
    # Observers see each frame leave the group, pushed by its last member.
    for kind in ("TTSAudioRawFrame", "BotSpeakingFrame"):
        assert (kind, "everything", "after") in hops.hops


async def test_a_frame_no_member_acts_on_leaves_the_group_as_one_observed_push() -> None:
    member = Seen("member", handled=(TextFrame,))
    group = PlacementGroup(Placement.AFTER_ASSISTANT_AGGREGATOR, [member])
    after = Seen("after")
    hops = Hops()
    down, _ = await run_test(Pipeline([group, after]), frames_to_send=[_audio(), _audio(), TextFrame("x")],
                             observers=[hops])
    assert [type(f) for f in down] == [TTSAudioRawFrame, TTSAudioRawFrame, TextFrame]
    assert member.kinds.count("TTSAudioRawFrame") == 0
    assert after.kinds.count("TTSAudioRawFrame") == 2
    leaving = [h for h in hops.hops if h[0] == "TTSAudioRawFrame" and h[2] == "after"]
    assert [h[1] for h in leaving] == [group.name, group.name]


async def test_upstream_frames_pass_by_members_that_do_not_name_them() -> None:
    member = Seen("member", handled=(TextFrame,))
    before = Seen("before")
    group = PlacementGroup(Placement.BEFORE_USER_AGGREGATOR, [member])
    _, up = await run_test(Pipeline([before, group]), frames_to_send=[BotSpeakingFrame(), TextFrame("up")],
                           frames_to_send_direction=FrameDirection.UPSTREAM)
    assert [type(f) for f in up] == [BotSpeakingFrame, TextFrame]
    assert "BotSpeakingFrame" not in member.kinds and "TextFrame" in member.kinds
    assert "BotSpeakingFrame" in before.kinds


async def test_a_queueing_member_gets_every_frame() -> None:
    # Passing a frame by a member with a queue would let it overtake the frames queued there.
    queued = Seen("queued", handled=(TextFrame,), direct=False)
    await run_test(PlacementGroup(Placement.BEFORE_LLM, [queued]), frames_to_send=[_audio(), TextFrame("x")])
    assert "TTSAudioRawFrame" in queued.kinds and "TextFrame" in queued.kinds


class Inspector(Seen):
    """Names text frames and only inspects them."""

    handled_frames = (TextFrame,)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.inspected: list[str] = []

    async def inspect_frame(self, frame: Frame, direction: FrameDirection) -> None:
        self.inspected.append(type(frame).__name__)


async def test_an_inspecting_member_sees_its_frames_in_passing_and_lifecycle_frames_as_a_processor() -> None:
    inspector, after = Inspector("inspector"), Seen("after")
    group = PlacementGroup(Placement.AFTER_OUTPUT_TRANSPORT, [inspector])
    hops = Hops()
    down, _ = await run_test(Pipeline([group, after]), frames_to_send=[TextFrame("a"), _audio(), InterruptionFrame()],
                             observers=[hops])
    assert [type(f) for f in down] == [TextFrame, TTSAudioRawFrame, InterruptionFrame]
    assert inspector.inspected == ["TextFrame"]
    assert "TextFrame" not in inspector.kinds and "InterruptionFrame" in inspector.kinds
    assert ("TextFrame", group.name, "after") in hops.hops


async def test_a_frame_inspected_first_still_reaches_the_next_member_that_acts_on_it() -> None:
    inspector, rewriter = Inspector("inspector"), Seen("rewriter", handled=(TextFrame,))
    await run_test(PlacementGroup(Placement.BEFORE_LLM, [inspector, rewriter]), frames_to_send=[TextFrame("a")])
    assert inspector.inspected == ["TextFrame"] and "TextFrame" in rewriter.kinds


async def test_a_frame_passing_by_is_not_reported_when_no_observer_watches_repeated_pushes(monkeypatch) -> None:
    class FirstPushes(BaseObserver):
        def __init__(self) -> None:
            super().__init__(observe_every_push=False)
            self.kinds: list[str] = []

        async def on_push_frame(self, data: FramePushed) -> None:
            self.kinds.append(type(data.frame).__name__)

    reported: list[str] = []
    report = WorkerObserver.on_push_frame

    async def spy(self: WorkerObserver, data: FramePushed) -> None:
        reported.append(data.source.name)
        await report(self, data)

    monkeypatch.setattr(WorkerObserver, "on_push_frame", spy)
    group = PlacementGroup(Placement.AFTER_ASSISTANT_AGGREGATOR, [Seen("member", handled=(TextFrame,))])
    first = FirstPushes()
    down, _ = await run_test(Pipeline([Seen("before"), group, Seen("after")]), frames_to_send=[_audio(), _audio()],
                             observers=[first])
    assert [type(f) for f in down] == [TTSAudioRawFrame, TTSAudioRawFrame]
    assert first.kinds.count("TTSAudioRawFrame") == 2  # each frame's first push, as before
    assert group.name not in reported and reported.count("after") >= 2
