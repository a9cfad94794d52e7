import pytest
from rich.console import Console

from pipecat_harness.cli import main
from pipecat_harness.decisions import DecisionLog
from pipecat_harness.trace.recorder import TraceRecorder
from pipecat_harness.trace.show import render_timeline
from pipecat_harness.trace.timeline import Timeline


def test_recorder_writes_decisions_and_events_as_jsonl(tmp_path):
    now = [100.0]
    log = DecisionLog("call-1", time_source=lambda: now[0])
    log.start()
    now[0] = 112.5
    path = tmp_path / "call.jsonl"
    recorder = TraceRecorder(path, call_id="call-1", decisions=log, metadata={"scenario": "x"})
    recorder.add("caller", "asr_final", t=1.0, text="A B C dash")
    decision = log.record("identifier_hold", "held", {"text": "A B C dash", "added_wait_ms": 0})
    log.set_outcome(decision, {"merged": True})
    recorder.close()
    timeline = Timeline.load(path)
    assert timeline.call == {"call_id": "call-1", "scenario": "x"}
    assert [e.kind for e in timeline] == ["call_started", "asr_final", "decision", "decision_outcome"]
    held = timeline.of("decision")[0]
    assert held.t == 12.5
    assert held.lane == "control" and held.data["control"] == "identifier_hold"
    assert held.data["evidence"]["text"] == "A B C dash"
    assert timeline.of("decision_outcome")[0].data["outcome"] == {"merged": True}


def test_bad_trace_lines_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"t": 0, "lane": "call", "kind": "call_started"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        Timeline.load(path)


def test_render_shows_lanes_and_text(tmp_path):
    recorder = TraceRecorder(None, call_id="c")
    recorder.add("caller", "submitted", t=2.0, text="my order is W two three")
    recorder.add("tool", "tool_request", t=2.5, name="get_order_details", arguments={"order_id": "W23"},
                 tool_call_id="call_1")
    console = Console(record=True, width=200)
    render_timeline(recorder.timeline(), console=console)
    out = console.export_text()
    assert "my order is W two three" in out
    assert 'get_order_details({"order_id": "W23"})' in out


def test_trace_show_command(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    recorder = TraceRecorder(path, call_id="c")
    recorder.add("model", "generated", t=1.0, text="Hello there")
    recorder.close()
    assert main(["trace", "show", str(path)]) == 0
    assert "Hello there" in capsys.readouterr().out
    assert main(["trace", "show", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such trace file" in capsys.readouterr().err


def test_spans_pair_each_start_with_the_next_stop_and_close_an_open_one_only_when_asked() -> None:
    from pipecat_harness.trace.timeline import TraceEvent

    timeline = Timeline([
        TraceEvent(1.0, "bot", "bot_started_speaking"), TraceEvent(2.5, "bot", "bot_stopped_speaking"),
        TraceEvent(3.0, "caller", "bot_started_speaking"),  # another lane: not the bot's audio
        TraceEvent(4.0, "bot", "bot_stopped_speaking"),  # no open stretch: ignored
        TraceEvent(5.0, "bot", "bot_started_speaking"), TraceEvent(6.0, "bot", "bot_started_speaking"),
    ])
    kinds = ("bot_started_speaking", "bot_stopped_speaking")
    assert timeline.spans(*kinds, lane="bot") == [(1.0, 2.5)]
    assert timeline.spans(*kinds, lane="bot", open_until=9.0) == [(1.0, 2.5), (6.0, 9.0)]
