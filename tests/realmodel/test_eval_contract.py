"""Pipecat's ``OpenAILLMService`` and ``eval --model`` against llama-cpp-python serving SmolLM2-135M."""

from __future__ import annotations

import json

from pipecat.frames.frames import ErrorFrame, LLMContextFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.cli import main
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.scenario import BUNDLED_DIR

# As Pipecat keeps a tool call in its context: the assistant message has content None.
TOOL_HISTORY = [
    {"role": "user", "content": "Where is my order 12345?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order": "12345"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Shipped on Monday."},
]


async def test_openaillmservice_answers_after_a_tool_call_in_its_context(model_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    arm = ModelArm("openai", model_server.model, base_url=model_server.base_url, max_tokens=16)
    llm = arm.build_service("You are a helpful order assistant. Answer in one sentence.")
    context = LLMContext(messages=[dict(m) for m in TOOL_HISTORY])
    down, up = await run_test(llm, frames_to_send=[LLMContextFrame(context), SleepFrame(sleep=10)],
                              expected_down_frames=None, expected_up_frames=None)
    text = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert text.strip()
    assert not [f for f in up if isinstance(f, ErrorFrame)]


def test_eval_model_runs_against_the_server_with_its_limit_and_its_missing_usage_said(model_server, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    out = tmp_path / "out"
    code = main(["eval", str(BUNDLED_DIR / "history_uninterrupted.yaml"), "--toggle", "history",
                 "--model", f"openai:{model_server.model}", "--base-url", model_server.base_url,
                 "--max-tokens", "24", "--workers", "1", "--out", str(out)])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["model"]["max_tokens"] == 24
    usage = results["usage"]
    assert usage["model_requests"] >= 2 and usage["tokens"] == "not reported"
    assert usage["completion_tokens_estimated"] > 0
    calls = results["controls"][0]["calls"]
    assert len(calls) == 2 and all(not call["error"] for call in calls)
    for call in calls:  # the caller of this scenario never barges in: no turn may count as interrupted
        assert call["history"]["interrupted_turns"] == 0
