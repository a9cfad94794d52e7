"""History controls: after a barge-in, keep in history what the caller heard."""

from __future__ import annotations

from pipecat_harness.history.corrector import Correction, CorrectionPolicy, HistoryCorrector
from pipecat_harness.history.estimator import DEFAULT_BIAS, DEFAULT_CHARS_PER_SEC, HeardPrefix, estimate_heard_prefix
from pipecat_harness.history.marks import format_mark, parse_mark, twilio_mark_message, twilio_mark_name
from pipecat_harness.history.playback import PlaybackTracker, ReplyPlayback, SpokenSegment
from pipecat_harness.history.synthesis import SynthesisObserver

__all__ = ["DEFAULT_BIAS", "DEFAULT_CHARS_PER_SEC", "Correction", "CorrectionPolicy", "HeardPrefix", "HistoryCorrector",
           "PlaybackTracker", "ReplyPlayback", "SpokenSegment", "SynthesisObserver", "estimate_heard_prefix",
           "format_mark", "parse_mark", "twilio_mark_message", "twilio_mark_name"]
