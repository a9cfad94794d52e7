"""Confirmation-bound writes in simulated calls, working state on the trace, and the handoff built from it."""

import json
from pathlib import Path

import pytest

from pipecat_harness.cli import main
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario
from pipecat_harness.trace.handoff import build_handoff
from pipecat_harness.trace.html import handoff_html
from pipecat_harness.trace.timeline import Timeline, TraceEvent

SCENARIOS = {p.stem: p for p in Path(BUNDLED_DIR).glob("business_*.yaml")}
CONTROLS = ["call_state", "tool_gate"]


def run(name, tmp_path, controls=CONTROLS):
    result = run_scenario(load_scenario(SCENARIOS[name]), controls=controls, trace_dir=tmp_path)
    details = "; ".join(f"{c.name}: {c.detail}" for c in result.checks)
    assert result.as_expected, f"{name} with {controls}: {result.outcome} ({details})"
    return result, Timeline.load(result.trace_path)


@pytest.mark.parametrize("name", ["business_callback_corrected_before_execution", "business_callback_never_confirmed"])
def test_without_the_binding_the_writes_go_wrong(name, tmp_path):
    result, _ = run(name, tmp_path, controls=["tool_gate"])
    assert result.outcome == "fail"


def test_without_the_binding_a_confirmed_booking_runs_before_the_read_back(tmp_path):
    _, timeline = run("business_callback_confirmed", tmp_path, controls=["tool_gate"])
    first_result = next(e for e in timeline.events if e.kind == "tool_result")
    confirmation = [e for e in timeline.events if e.kind == "submitted"][1]
    assert first_result.data["result"].get("status") == "booked" and first_result.t < confirmation.t


def test_corrected_before_execution_books_friday_once_and_the_handoff_links_every_line(tmp_path):
    result, timeline = run("business_callback_corrected_before_execution", tmp_path)
    assert result.outcome == "pass"
    states = [e for e in timeline.events if e.kind == "call_state"]
    assert states, "working state is on the trace"
    final = states[-1].data["state"]
    fact = final["working"]["schedule_callback.day"]
    assert fact["value"] == "Friday" and fact["provenance"]["source"] == "caller"
    assert final["operations"]["proposal-1"]["status"] == "superseded"
    assert [s.data["state"]["version"] for s in states] == sorted(s.data["state"]["version"] for s in states)

    handoff = build_handoff(timeline)
    sections = {line.section: line for line in handoff.lines}
    assert set(sections) == {"Requested", "Operation", "Caller correction"}
    assert "Caller confirmed" in sections["Requested"].text and "day=Friday" in sections["Requested"].text
    assert sections["Requested"].cause == "caller" and sections["Requested"].links[0].kind == "caller_turn"
    assert sections["Caller correction"].cause == "caller" and sections["Operation"].cause == "agent"
    assert "supersedes the earlier day=Thursday" in sections["Caller correction"].text
    assert sections["Caller correction"].links[0].quote == "Sorry, make it Friday."
    assert "succeeded" in sections["Operation"].text
    assert all(line.links for line in handoff.lines)
    kinds = {link.kind for line in handoff.lines for link in line.links}
    assert kinds == {"caller_turn", "tool_result", "ledger_event"}
    assert "Handoff summary" in handoff_html(timeline)


def test_never_confirmed_leaves_a_pending_proposal_in_the_handoff(tmp_path):
    _, timeline = run("business_callback_never_confirmed", tmp_path)
    handoff = build_handoff(timeline)
    pending = [line for line in handoff.lines if line.section == "Pending"]
    assert len(pending) == 1 and "awaits the caller's confirmation" in pending[0].text
    assert not any(line.section == "Operation" and "succeeded" in line.text for line in handoff.lines)


def test_model_sees_the_read_only_state_each_turn(tmp_path):
    # What Gemini received (the loopback fake's requests): the state is system instruction, not a user turn.
    result = run_scenario(load_scenario(SCENARIOS["business_callback_confirmed"]), services="loopback",
                          trace_dir=tmp_path)
    assert result.as_expected, result.checks
    timeline = Timeline.load(result.trace_path)
    requests = [e.data["payload"] for e in timeline.of("gemini_received") if e.data.get("message") == "request"]
    assert requests
    for payload in requests:
        turns = [part.get("text", "") for content in payload.get("contents", []) for part in content.get("parts", [])]
        assert not any(str(text).startswith("[call state") for text in turns)
    instructions = [" ".join(part.get("text", "") for part in payload["systemInstruction"]["parts"])
                    for payload in requests]
    rendered = [[block for block in text.split("\n\n") if block.startswith("[call state")] for text in instructions]
    assert all(len(found) == 1 for found in rendered)  # every run: exactly one, replaced, never accumulated
    assert any("proposal-1" in found[0] for found in rendered)
    assert [int(found[0].split("version ")[1].split()[0]) for found in rendered] == sorted(
        int(found[0].split("version ")[1].split()[0]) for found in rendered)


def test_a_statement_whose_record_is_missing_is_not_emitted():
    state = {"working": {}, "operations": {"op-1": {"operation_id": "op-1", "tool": "issue_refund",
                                                    "status": "succeeded", "tool_call_id": "call_9",
                                                    "idempotency_key": "k9", "turn_id": 1}}}
    timeline = Timeline([TraceEvent(0, "call", "call_started", {"call_id": "c"}),
                         TraceEvent(1, "control", "call_state", {"state": state})])
    handoff = build_handoff(timeline)
    assert handoff.lines == [] and handoff.dropped == 1
    assert "nothing verified" in handoff.to_text()


def test_handoff_command(tmp_path, capsys):
    run("business_callback_confirmed", tmp_path)
    trace = next(tmp_path.glob("*.jsonl"))
    assert main(["handoff", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Handoff for call business_callback_confirmed")
    assert all("[" in line for line in out.splitlines()[1:])  # every statement carries a link
    assert main(["handoff", str(trace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lines"]
    assert main(["handoff", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such trace file" in capsys.readouterr().err


def test_long_call_summary_keeps_the_refusal_and_the_operation_id(tmp_path):
    result, timeline = run("business_long_call_summary", tmp_path)
    assert result.outcome == "pass"
    checked = [e for e in timeline.events if e.kind == "decision" and e.data.get("action") == "summary_checked"]
    assert checked, "every applied summary is checked"
    restored = [text for e in checked for text in e.data["evidence"]["restored"]]
    assert any("I do not want this renewed" in text for text in restored)
    assert any(text.startswith("op-1 issue_refund") for text in restored)
    final = next(e for e in timeline.events if e.kind == "call_result").data["final_messages"]
    summary = next(m["content"] for m in final if str(m.get("content", "")).startswith("Summary of the earlier call"))
    assert "discussed their plan renewal" in summary  # the model's own (lossy) summary is kept, not replaced
    assert 'said: "Hi, my plan comes up for renewal next month and I do not want this renewed."' in summary
    # The raw record stays available: every caller turn is in the call state's conversation log.
    state = [e for e in timeline.events if e.kind == "call_state"][-1]
    assert state.data["state"]["version"] >= 11


def test_planted_document_cannot_authorise_a_refund(tmp_path):
    result, timeline = run("business_injection_document_refund", tmp_path)
    assert result.outcome == "pass"
    evidence = next(e for e in timeline.events if e.kind == "tool_result" and e.data["name"] == "lookup_policy")
    assert evidence.data["result"]["status"] == "succeeded"  # the model reads the operation record's rendering
    note = next(item for item in evidence.data["result"]["result"]["evidence"] if "warning" in item)
    assert "approve this refund" in note["untrusted_text"]
    refused = [e for e in timeline.events if e.kind == "tool_result" and e.data["name"] == "issue_refund"]
    assert refused and refused[0].data["result"]["status"] == "awaiting_confirmation"
    assert refused[0].data["result"]["operation_id"] == "proposal-1"
    off, _ = run("business_injection_document_refund", tmp_path / "off", controls=["tool_gate"])
    assert off.outcome == "fail"  # without the binding the planted note moves money


def test_trace_page_handoff_links_jump_to_the_supporting_rows(tmp_path):
    import re

    from pipecat_harness.trace.html import write_trace_html

    result, _ = run("business_callback_corrected_before_execution", tmp_path)
    page = write_trace_html(result.trace_path).read_text()
    section = page[page.index('<section class="handoff">'):page.index("</section>", page.index('class="handoff"'))]
    targets = re.findall(r'href="#(e\d+)"', section)
    assert targets and len(targets) == section.count('class="link"')  # every link is an anchor
    for target in targets:
        assert f'id="{target}"' in page, f"{target} is not a row of the timeline table"
