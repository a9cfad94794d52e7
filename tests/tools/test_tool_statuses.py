"""Gate statuses mean what they say wherever a tool result is read: only an executed call counts as done."""

import pytest
from pipecat.frames.frames import FunctionCallResultFrame

from pipecat_harness.grader.observer import _succeeded
from pipecat_harness.tools import GateResult, GateStatus
from pipecat_harness.tools.result import reports_done


@pytest.mark.parametrize("status", [GateStatus.NOT_EXECUTED, GateStatus.BLOCKED, GateStatus.FAILED,
                                    GateStatus.OUTCOME_UNKNOWN])
def test_refused_failed_and_unknown_results_are_not_done_for_the_grader(status):
    payload = GateResult(status, "issue_refund", reason="no reply within 10s").to_tool_result()
    frame = FunctionCallResultFrame(function_name="issue_refund", tool_call_id="c1", arguments={}, result=payload)
    assert not reports_done(payload) and not _succeeded(frame)


def test_an_executed_result_is_done():
    payload = GateResult(GateStatus.EXECUTED, "issue_refund", {"refund_id": 1}).to_tool_result()
    frame = FunctionCallResultFrame(function_name="issue_refund", tool_call_id="c1", arguments={}, result=payload)
    assert reports_done(payload) and _succeeded(frame)
    assert not reports_done({"error": "order not found"}) and not reports_done(payload, error="boom")
