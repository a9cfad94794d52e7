"""Input controls: what the model receives and when.

* :func:`hold_decision` — pure ending rules: does a transcript end mid-identifier?
* :class:`IdentifierHoldStopStrategy` — delays the configured user-turn stop
  strategy while the turn ends in an open identifier.
* :class:`SpellingNormalizer` — rewrites ASR spelling artifacts before the user aggregator.
* :class:`SilentReplyGuard` — re-asks when a confirmation got speech but no transcript.
"""

from pipecat_harness.input.endings import IDENTIFIER_CUES, HoldDecision, hold_decision
from pipecat_harness.input.identifier_formats import DOMAIN_WAIT_SECS, IdentifierFormat, IdentifierHoldConfig

__all__ = [
    "DOMAIN_WAIT_SECS",
    "IDENTIFIER_CUES",
    "HoldDecision",
    "IdentifierFormat",
    "IdentifierHoldConfig",
    "hold_decision",
]
