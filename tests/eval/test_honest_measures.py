"""``eval --model`` against a server that reports no usage, streams slowly, or is still talking at the call limit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pipecat.frames.frames import LLMContextFrame, LLMFullResponseStartFrame, LLMTextFrame
from pipecat.observers.base_observer import FrameProcessed, FramePushed
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection

from pipecat_harness.cli import main
from pipecat_harness.eval.metrics import HistoryFidelity, measure_history
from pipecat_harness.fakes.background import serve_in_background
from pipecat_harness.fakes.openai_chat import OpenAIChatFake
from pipecat_harness.sim.history_metrics import measure_playback
from pipecat_harness.sim.model_meter import ModelMeter
from pipecat_harness.sim.sim_tts import SpeechLedger, SpokenWord
from tests.eval.test_model_arm import SCENARIO, refund_brain


def _eval(tmp_path: Path, base_url: str, *extra: str) -> dict:
    out = tmp_path / "out"
    code = main(["eval", SCENARIO, "--toggle", "tool_gate", "--model", "openai:test-model", "--base-url", base_url,
                 "--workers", "1", "--out", str(out), *extra])
    assert code == 0
    return json.loads((out / "results.json").read_text())


def test_a_server_without_stream_usage_is_recorded_as_not_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    fake = OpenAIChatFake(refund_brain, server="llama-cpp-python")
    with serve_in_background(fake):
        results = _eval(tmp_path, fake.base_url)
    usage = results["usage"]
    assert usage["model_requests"] > 0
    assert usage["tokens"] == "not reported" and usage["tokens_per_call"] == "not reported"
    assert usage["completion_tokens_estimated"] > 0 and "estimated" in usage["estimate"]
    assert "tokens not reported by the model" in capsys.readouterr().out


def test_the_token_budget_is_not_kept_silently_when_no_usage_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    fake = OpenAIChatFake(refund_brain, server="llama-cpp-python")
    with serve_in_background(fake):
        results = _eval(tmp_path, fake.base_url, "--budget-tokens", "100000")
    assert results["rounds_done"] == 1
    assert "the model reported no token usage" in results["ended"]


def test_a_server_that_reports_usage_is_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    fake = OpenAIChatFake(refund_brain, server="openai")
    with serve_in_background(fake):
        results = _eval(tmp_path, fake.base_url)
    assert results["usage"]["tokens"]["total"] > 0


def _ledger(played_secs: float) -> SpeechLedger:
    words = [SpokenWord(w, i * 0.4, i * 0.4 + 0.3) for i, w in enumerate("one two three four five six".split())]
    return SpeechLedger(words={"c1": words[:3], "c2": words}, played_secs={"c1": 99.0, "c2": played_secs})


def test_a_reply_still_playing_at_the_call_limit_is_call_ended_not_a_barge_in():
    history = [{"role": "assistant", "content": "one two three"}, {"role": "assistant", "content": "one two"}]
    barged = measure_playback(_ledger(0.5), history)
    assert barged[-1].interrupted and not barged[-1].call_ended
    ended = measure_playback(_ledger(0.5), history, call_ended=True)
    assert not ended[-1].interrupted and ended[-1].call_ended and ended[-1].played_removed == 0
    assert not ended[0].call_ended  # a turn that played out is scored as usual
    figures = measure_history(SimpleNamespace(playback=ended, model_replies=[]))  # type: ignore[arg-type]
    assert figures == HistoryFidelity(assistant_turns=2, call_ended_turns=1)


async def test_the_hold_on_virtual_time_lasts_while_frames_stream_and_ends_when_they_stop():
    loop = asyncio.get_running_loop()
    held: list[asyncio.Future] = []
    loop.hold_time_for = held.append  # type: ignore[attr-defined]
    llm = object()
    meter = ModelMeter(llm, hold_time=True, max_hold_secs=0.3)

    def pushed(frame):
        return FramePushed(llm, llm, frame, FrameDirection.DOWNSTREAM, 0)  # type: ignore[arg-type]

    try:
        context = LLMContextFrame(LLMContext(messages=[]))
        await meter.on_process_frame(FrameProcessed(llm, context, FrameDirection.DOWNSTREAM, 0))  # type: ignore[arg-type]
        await meter.on_push_frame(pushed(LLMFullResponseStartFrame()))
        [future] = held
        for _ in range(8):  # 0.8 s of a slow stream, a frame every 0.1 s: longer than the 0.3 s limit
            await asyncio.sleep(0.1)
            await meter.on_push_frame(pushed(LLMTextFrame("word ")))
            assert not future.done()
        await asyncio.sleep(0.6)  # the stream went quiet
        assert future.done()
    finally:
        del loop.hold_time_for  # type: ignore[attr-defined]
    assert meter.calls[-1].text == "word " * 8


@pytest.mark.parametrize("extra", [["--max-tokens", "64"]])
def test_max_tokens_reaches_every_request_and_the_results(tmp_path, monkeypatch, extra):
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-key")
    fake = OpenAIChatFake(refund_brain, server="llama-cpp-python")
    with serve_in_background(fake):
        results = _eval(tmp_path, fake.base_url, *extra)
    assert results["model"]["max_tokens"] == 64
    assert fake.requests and all(request.max_tokens == 64 for request in fake.requests)
    assert not fake.refused  # an assistant tool-call message goes out with "" for content
