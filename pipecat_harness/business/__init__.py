"""Where the agent meets the business system: working state, confirmation before writes, identity-bound writes.

``pipecat_harness.business.control.CallStateControl`` wires these into a pipeline (imported on demand).
"""

from pipecat_harness.business.confirmation import ConfirmationPolicy, Proposal, ProposalStatus
from pipecat_harness.business.permissions import CustomerVerification, identity_rule
from pipecat_harness.business.readback import unstated_arguments
from pipecat_harness.business.replies import classify_reply, is_confirmation
from pipecat_harness.business.working_state import STATE_MESSAGE_MARK, WorkingStateKeeper, render_state

__all__ = ["STATE_MESSAGE_MARK", "ConfirmationPolicy", "CustomerVerification", "Proposal", "ProposalStatus",
           "WorkingStateKeeper", "classify_reply", "identity_rule", "is_confirmation", "render_state",
           "unstated_arguments"]
