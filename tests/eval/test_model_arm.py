"""The real-model arm end to end: ``eval --model`` drives the bots' Pipecat LLM service against a provider API.

The provider is the project's loopback Gemini or OpenAI-compatible fake, served from a thread of its own
like a remote API; what it answers is decided by a brain reading the provider request it received, as a
model would. The brain behaves like a model that asks for the same refund twice in one reply, so the
comparison must show the tool gate turning a double refund into one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pipecat_harness.cli import main
from pipecat_harness.fakes.background import serve_in_background
from pipecat_harness.fakes.chat import ChatReply, ChatRequest
from pipecat_harness.fakes.gemini import GeminiFake
from pipecat_harness.fakes.openai_chat import OpenAIChatFake
from pipecat_harness.sim.scenario import BUNDLED_DIR

SCENARIO = str(BUNDLED_DIR / "duplicate_refund.yaml")
_REFUND = {"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged item"}


def refund_brain(request: ChatRequest) -> ChatReply:
    """Decide from the conversation the provider received: greet, refund (twice), confirm, say goodbye."""
    last = request.messages[-1] if request.messages else {}
    users = [str(m.get("content") or "") for m in request.messages if m.get("role") == "user"]
    said = users[-1].lower() if users else ""
    if last.get("role") == "tool":
        return ChatReply(text="Done. Your refund of forty five dollars is on its way. Anything else?")
    if "refund" in said and "issue_refund" in request.tools:
        return ChatReply(text="I'm sorry about that. Let me refund the thermostat.",
                         tool_calls=[{"name": "issue_refund", "arguments": dict(_REFUND)},
                                     {"name": "issue_refund", "arguments": dict(_REFUND)}])
    if re.search(r"\bno\b|that's all", said):
        return ChatReply(text="Thanks for calling. Goodbye!")
    return ChatReply(text="Thanks for calling Acme. How can I help you today?")


def _run(tmp_path: Path, provider: str, base_url: str, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "out"
    code = main(["eval", SCENARIO, "--toggle", "tool_gate", "--model", f"{provider}:test-model",
                 "--base-url", base_url, "--temperature", "0.4", "--seed", "7", "--workers", "1",
                 "--out", str(out), *extra])
    return code, json.loads((out / "results.json").read_text())


def _check_ab(results: dict[str, Any], max_tokens: int | None = None) -> None:
    assert results["model"] == {"provider": results["model"]["provider"], "name": "test-model",
                                "base_url": results["model"]["base_url"], "temperature": 0.4, "seed": 7,
                                "max_tokens": max_tokens, "label": f"{results['model']['provider']}:test-model"}
    control = results["controls"][0]
    # The model asked for the refund twice in both arms; only the gate kept it to one.
    assert (control["on"]["passed"], control["on"]["calls"]) == (1, 1)
    assert (control["off"]["passed"], control["off"]["calls"]) == (0, 1)
    assert control["off"]["figures"]["duplicate_writes_executed"]["count"] == 1
    usage = results["usage"]
    assert usage["model_requests"] >= 6 and usage["tokens"]["total"] > 0  # from the provider's usage metadata
    for call in control["calls"]:
        assert call["model_requests"] >= 3 and call["total_tokens"] > 0 and not call["error"]


def test_gemini_model_arm_runs_googlellmservice_against_the_provider(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "loopback-key")
    fake = GeminiFake(refund_brain)
    with serve_in_background(fake):
        code, results = _run(tmp_path, "gemini", fake.base_url)
    assert code == 0
    _check_ab(results)
    bodies = [e.payload for e in fake.log if e.direction == "received"]
    assert bodies
    for body in bodies:
        config = body.get("generationConfig") or body.get("generation_config") or {}
        assert config.get("temperature") == 0.4 and config.get("seed") == 7
        declared = [d["name"] for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
        assert "issue_refund" in declared  # the scenario's tools reach the model
        system = json.dumps(body.get("systemInstruction") or body.get("system_instruction"))
        assert "customer-service agent" in system  # the scenario's system prompt, as system instruction


def test_openai_model_arm_runs_openaillmservice_against_a_compatible_endpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    fake = OpenAIChatFake(refund_brain)
    with serve_in_background(fake):
        code, results = _run(tmp_path, "openai", fake.base_url, "--max-tokens", "64")
    assert code == 0
    _check_ab(results, max_tokens=64)
    assert not fake.refused
    bodies = [e.payload for e in fake.log if e.direction == "received"]
    assert bodies
    for body in bodies:
        assert body["model"] == "test-model" and body["temperature"] == 0.4 and body["seed"] == 7
        assert body["max_tokens"] == 64
        assert "issue_refund" in [t["function"]["name"] for t in body["tools"]]


@pytest.mark.parametrize(("provider", "variables", "named"),
                         [("gemini", ("GOOGLE_API_KEY", "GEMINI_API_KEY"), "GOOGLE_API_KEY"),
                          ("openai", ("OPENAI_API_KEY",), "OPENAI_API_KEY")])
def test_without_a_key_eval_names_the_missing_variable_and_exits_2(
        provider: str, variables: tuple[str, ...], named: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for variable in variables:
        monkeypatch.delenv(variable, raising=False)
    assert main(["eval", SCENARIO, "--toggle", "tool_gate", "--model", f"{provider}:some-model",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "claude"], "gemini:<model> or openai:<model>"),
    (["--model", "openai:m", "--base-url", "ftp://x"], "not a URL"),
    (["--model", "openai:m", "--temperature", "3"], "--temperature"),
    (["--base-url", "http://127.0.0.1:1/v1"], "--base-url goes with --model"),
    (["--budget-calls", "0"], "--budget-calls must be positive"),
    (["--model", "openai:m", "--max-tokens", "0"], "--max-tokens 0"),
    (["--max-tokens", "50"], "--max-tokens goes with --model"),
])
def test_bad_model_options_are_one_sentence(args: list[str], message: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert main(["eval", SCENARIO, "--toggle", "tool_gate", *args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
