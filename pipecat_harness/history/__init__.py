"""History controls: after a barge-in, keep in history what the caller heard.

* :func:`estimate_heard_prefix`: pure estimate of the heard prefix of a text
  from played seconds (word timestamps when given, else a speech-duration model);
* :class:`PlaybackTracker`: per assistant reply, the generated text and the
  audio actually written (or confirmed played by receipts);
* :class:`HistoryCorrector`: rewrites the interrupted reply in the
  ``LLMContext`` to the heard prefix, never touching tool messages;
* :class:`HistoryControl`: both, as a switchable harness control.
"""

from __future__ import annotations

from pipecat_harness.history.corrector import Correction, CorrectionPolicy, HistoryCorrector
from pipecat_harness.history.estimator import DEFAULT_BIAS, DEFAULT_CHARS_PER_SEC, HeardPrefix, estimate_heard_prefix
from pipecat_harness.history.marks import format_mark, parse_mark, twilio_mark_message, twilio_mark_name
from pipecat_harness.history.playback import PlaybackTracker, ReplyPlayback, SpokenSegment
from pipecat_harness.history.synthesis import SynthesisObserver

__all__ = [
    "DEFAULT_BIAS",
    "DEFAULT_CHARS_PER_SEC",
    "Correction",
    "CorrectionPolicy",
    "HeardPrefix",
    "HistoryCorrector",
    "PlaybackTracker",
    "ReplyPlayback",
    "SpokenSegment",
    "SynthesisObserver",
    "estimate_heard_prefix",
    "format_mark",
    "parse_mark",
    "twilio_mark_message",
    "twilio_mark_name",
]
