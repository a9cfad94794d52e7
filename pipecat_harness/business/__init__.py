"""Where the agent meets the business system: working state, confirmation before writes, identity-bound writes.

* :class:`WorkingStateKeeper` fills a call's :class:`~pipecat_harness.state.CallState` with provenance;
* :class:`ConfirmationPolicy` runs a write only after the caller confirmed a read-back they heard
  (:func:`classify_reply` reads the answer; :func:`unstated_arguments` compares the read-back as values);
* :class:`CustomerVerification` establishes the verified customer and allows account writes only on the
  records that customer owns (:func:`identity_rule`: verification alone);
* ``pipecat_harness.business.control.CallStateControl`` wires them into a pipeline (imported on demand).
"""

from pipecat_harness.business.confirmation import ConfirmationPolicy, Proposal, ProposalStatus
from pipecat_harness.business.permissions import CustomerVerification, identity_rule
from pipecat_harness.business.readback import unstated_arguments
from pipecat_harness.business.replies import classify_reply, is_confirmation
from pipecat_harness.business.working_state import (
    STATE_MESSAGE_MARK,
    WorkingStateKeeper,
    render_state,
)

__all__ = [
    "STATE_MESSAGE_MARK",
    "ConfirmationPolicy",
    "CustomerVerification",
    "Proposal",
    "ProposalStatus",
    "WorkingStateKeeper",
    "classify_reply",
    "identity_rule",
    "is_confirmation",
    "render_state",
    "unstated_arguments",
]
