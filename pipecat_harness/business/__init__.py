"""Where the agent meets the business system: working state, confirmation before writes, identity-bound writes.

* :class:`WorkingStateKeeper` fills a call's :class:`~pipecat_harness.state.CallState` with provenance;
* :class:`ConfirmationPolicy` runs a write only after a later caller turn confirmed the same arguments;
* :func:`identity_rule` holds account writes until the caller's identity is verified;
* ``pipecat_harness.business.control.CallStateControl`` wires them into a pipeline (imported on demand).
"""

from pipecat_harness.business.confirmation import ConfirmationPolicy, Proposal, ProposalStatus, is_confirmation
from pipecat_harness.business.permissions import identity_rule
from pipecat_harness.business.working_state import (
    STATE_MESSAGE_MARK,
    WorkingStateKeeper,
    render_state,
)

__all__ = [
    "STATE_MESSAGE_MARK",
    "ConfirmationPolicy",
    "Proposal",
    "ProposalStatus",
    "WorkingStateKeeper",
    "identity_rule",
    "is_confirmation",
    "render_state",
]
