from pipecat.frames.frames import TextFrame
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import Harness
from pipecat_harness.observer_group import ObserverGroup
from pipecat_harness.trace.recorder import TraceRecorder


class _Seen(BaseObserver):
    def __init__(self, every: bool, fail: bool = False) -> None:
        super().__init__(observe_every_push=every)
        self.pushes: list[bool] = []
        self.fail = fail

    async def on_push_frame(self, data: FramePushed) -> None:
        self.pushes.append(data.first_push)
        if self.fail:
            raise RuntimeError("observer bug")


def _push(first: bool) -> FramePushed:
    return FramePushed(source=FrameProcessor(), destination=FrameProcessor(), frame=TextFrame("hi"),
                       direction=FrameDirection.DOWNSTREAM, timestamp=0, first_push=first)


async def test_members_get_the_pushes_they_asked_for_and_one_failure_silences_no_one():
    broken, once, every = _Seen(every=False, fail=True), _Seen(every=False), _Seen(every=True)
    group = ObserverGroup([broken, once, every])
    assert group.observe_every_push
    for first in (True, False, False, True):
        await group.on_push_frame(_push(first))
    assert broken.pushes == [True, True]
    assert once.pushes == [True, True]
    assert every.pushes == [True, False, False, True]
    assert not ObserverGroup([_Seen(every=False)]).observe_every_push


def test_harness_gives_the_worker_one_observer_with_the_recorder_last(tmp_path):
    harness = Harness(HarnessConfig(), trace_path=tmp_path / "call.jsonl")
    [group] = harness.observers()
    assert isinstance(group, ObserverGroup)
    assert isinstance(group.members[-1], TraceRecorder)
    assert len(group.members) > 1
