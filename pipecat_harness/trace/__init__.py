"""Call timelines: the recorder, the timeline model and its renderings."""

from pipecat_harness.trace.recorder import TraceRecorder
from pipecat_harness.trace.timeline import LANES, Timeline, TraceEvent

__all__ = ["LANES", "Timeline", "TraceEvent", "TraceRecorder"]
