"""Simulated calls with the bots' real services (Deepgram, Gemini or OpenAI, ElevenLabs) against the loopback fakes."""

from __future__ import annotations

from pipecat_harness.checklist.directive import DEFAULT_MARKER
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import bundled_scenario_paths, load_scenario
from pipecat_harness.trace.timeline import Timeline


def _scenario(name: str):
    return load_scenario(str(next(p for p in bundled_scenario_paths() if p.stem == name)))


def test_gemini_call_matches_the_scripted_call_and_traces_every_provider(tmp_path):
    scenario = _scenario("duplicate_refund")
    scripted = run_scenario(scenario)
    loopback = run_scenario(scenario, services="loopback", trace_dir=tmp_path)
    assert loopback.as_expected and loopback.passed, loopback.checks
    assert loopback.model_replies == scripted.model_replies
    timeline = Timeline.load(loopback.trace_path)
    kinds = {e.kind for e in timeline.events}
    assert {"gemini_received", "gemini_sent", "deepgram_received", "deepgram_sent", "elevenlabs_received",
            "elevenlabs_sent"} <= kinds
    calls = [e for e in timeline.of("gemini_sent") if any("functionCall" in p for c in
                                                           e.data["payload"].get("candidates", [])
                                                           for p in c["content"]["parts"])]
    assert [len(e.data["payload"]["candidates"][0]["content"]["parts"]) for e in calls] == [2]  # one response
    finals = [e for e in timeline.of("deepgram_sent") if e.data["payload"].get("is_final")]
    assert finals and all(e.data["payload"]["channel"]["alternatives"][0]["words"] is not None for e in finals)
    assert any(e.data["payload"].get("alignment") for e in timeline.of("elevenlabs_sent"))


def test_openai_compatible_path_passes_the_same_scenario():
    result = run_scenario(_scenario("duplicate_refund"), services="loopback-openai")
    assert result.as_expected and result.passed, result.checks


def test_checklist_directive_is_gemini_system_instruction_on_every_model_run(tmp_path):
    from pipecat_harness.config import HarnessConfig

    result = run_scenario(_scenario("checklist_site_check_in"), HarnessConfig().only("checklist"),
                          services="loopback", trace_dir=tmp_path)
    assert result.passed, result.checks
    requests = [e.data["payload"] for e in Timeline.load(result.trace_path).of("gemini_received")
                if e.data["message"] == "request"]
    assert len(requests) >= 10
    for body in requests:
        system = " ".join(p.get("text", "") for p in body["systemInstruction"]["parts"])
        assert DEFAULT_MARKER in system
        turns = [p.get("text", "") for c in body["contents"] for p in c["parts"] if c["role"] == "user"]
        # The adapter copies the instruction into a user turn only when no caller turn exists yet (the greeting).
        caller_turns = [t for t in turns if t.strip() != system.strip()]
        assert not any(DEFAULT_MARKER in t for t in caller_turns), caller_turns


def _gemini_requests(result) -> list[dict]:
    return [e.data["payload"] for e in Timeline.load(result.trace_path).of("gemini_received")
            if e.data["message"] == "request"]


def test_a_reconciled_write_reaches_gemini_as_system_instruction_not_a_caller_turn(tmp_path):
    result = run_scenario(_scenario("tools_callback_unknown_reconcile_first"), services="loopback",
                          trace_dir=tmp_path)
    assert result.as_expected and result.passed, result.checks
    notice = "Update on an earlier book_callback"
    told = 0
    for body in _gemini_requests(result):
        system = " ".join(p.get("text", "") for p in body["systemInstruction"]["parts"])
        told += notice in system
        user_turns = [p.get("text", "") for c in body["contents"] if c["role"] == "user" for p in c["parts"]]
        assert not any(notice in t for t in user_turns)
    assert told >= 2, "the generation after the write settled carries the notice, its tool re-runs included"


def test_context_summarisation_asks_the_gemini_fake_out_of_band(tmp_path):
    scenario = _scenario("business_long_call_summary")
    result = run_scenario(scenario, services="loopback", trace_dir=tmp_path)
    assert result.as_expected and result.passed, result.checks
    summarised = next(c for c in result.checks if c.name == "context summarised")
    assert summarised.ok, summarised
    sent = [e.data["payload"] for e in Timeline.load(result.trace_path).of("gemini_sent")
            if e.data["message"] == "response"]
    texts = [p["text"] for body in sent for p in body["candidates"][0]["content"]["parts"]]
    assert texts and set(texts) == {scenario.model.summary}
