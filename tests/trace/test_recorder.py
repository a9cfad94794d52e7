import json
from pathlib import Path

from pipecat.frames.frames import LLMContextFrame
from pipecat.observers.base_observer import FramePushed
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService

from pipecat_harness.trace.recorder import TraceRecorder
from pipecat_harness.trace.show import describe_event
from pipecat_harness.trace.timeline import Timeline


class _Call:
    """A context growing turn by turn, pushed to a real LLM service as Pipecat does."""

    def __init__(self, recorder: TraceRecorder) -> None:
        self.recorder = recorder
        self.context = LLMContext(messages=[{"role": "system", "content": "You are Sam."}])
        self.source = FrameProcessor()
        self.llm = OpenAILLMService(api_key="offline")
        self.t = 0.0
        self.truth: list[list[dict]] = []

    async def run_model(self) -> None:
        self.t += 1.0
        self.truth.append(json.loads(json.dumps(self.context.get_messages())))
        await self.recorder.on_push_frame(FramePushed(
            source=self.source, destination=self.llm, frame=LLMContextFrame(self.context),
            direction=FrameDirection.DOWNSTREAM, timestamp=int(self.t * 1e9)))

    async def turn(self, number: int) -> None:
        self.context.add_message({"role": "user", "content": f"turn {number}: my order is W{number:07d}"})
        await self.run_model()
        self.context.add_message({"role": "assistant", "content": f"Let me look up order W{number:07d} for you."})


async def test_model_inputs_are_logged_as_deltas_and_rebuilt_exactly(tmp_path):
    path = tmp_path / "call.jsonl"
    recorder = TraceRecorder(path, call_id="c")
    call = _Call(recorder)
    await call.run_model()
    for number in range(1, 6):
        await call.turn(number)
    # The history control rewrites an earlier assistant message in place: logged from there on.
    call.context.get_messages()[4]["content"] = "Let me look"
    await call.turn(6)
    # A tool call and its result run the model again: the reply, the call and the result are new.
    call.context.add_message({"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]})
    call.context.add_message({"role": "tool", "tool_call_id": "c1", "content": "{\"status\": \"shipped\"}"})
    await call.run_model()
    recorder.request_full_context()
    await call.turn(7)
    recorder.close()

    timeline = Timeline.load(path)
    inputs = timeline.of("model_input")
    assert [e.data["keep"] for e in inputs] == [0, 1, 2, 4, 6, 8, 4, 12, 0]
    assert [len(e.data["messages"]) for e in inputs] == [1, 1, 2, 2, 2, 2, 8, 3, 16]
    assert [context for _, context in timeline.model_contexts()] == call.truth
    assert timeline.model_context(inputs[-2])[-1]["role"] == "tool"
    assert describe_event(inputs[2]).startswith("4 messages (2 new); last user: turn 2")
    # In-memory events read the same as the file.
    assert [c for _, c in recorder.timeline().model_contexts()] == call.truth


async def test_trace_size_grows_linearly_with_the_number_of_turns(tmp_path):
    sizes = {}
    for turns in (10, 100):
        path = tmp_path / f"{turns}.jsonl"
        recorder = TraceRecorder(path, call_id="c")
        call = _Call(recorder)
        for number in range(turns):
            await call.turn(number)
        recorder.close()
        sizes[turns] = path.stat().st_size
    # Ten times the turns, ten times the bytes (logging whole contexts would be ~60 times).
    assert 9 < sizes[100] / sizes[10] < 11


def test_old_traces_with_whole_contexts_still_read(tmp_path):
    path = tmp_path / "old.jsonl"
    lines = [{"t": 1.0, "lane": "model", "kind": "model_input", "messages": [{"role": "user", "content": "a"}]},
             {"t": 2.0, "lane": "model", "kind": "model_input",
              "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    timeline = Timeline.load(path)
    assert [len(c) for _, c in timeline.model_contexts()] == [1, 2]
    assert describe_event(timeline.of("model_input")[1]).startswith("2 messages; last user: b")


def test_trace_writer_reports_an_unwritable_file_and_the_call_goes_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    recorder = TraceRecorder(blocker / "call.jsonl", call_id="c")
    recorder.add("caller", "submitted", t=1.0, text="hello")
    recorder.close()
    assert recorder._writer is not None and isinstance(recorder._writer.error, OSError)
    assert [e.kind for e in recorder.events] == ["call_started", "submitted"]


def test_events_are_encoded_on_the_writer_thread_not_the_callers(tmp_path):
    import threading

    class Value:
        """Encoded as its text; notes the thread that encoded it."""

        threads: list[str] = []

        def __str__(self) -> str:
            Value.threads.append(threading.current_thread().name)
            return "value"

    path = tmp_path / "call.jsonl"
    recorder = TraceRecorder(path, call_id="c")
    recorder.add("tool", "tool_result", t=1.0, result={"v": Value()})
    recorder.close()
    assert Value.threads == ["trace-writer"]
    assert json.loads(path.read_text().splitlines()[-1])["result"] == {"v": "value"}


def test_an_event_with_circular_data_is_kept_with_its_data_as_text(tmp_path):
    loop: dict = {}
    loop["self"] = loop
    path = tmp_path / "call.jsonl"
    recorder = TraceRecorder(path, call_id="c")
    recorder.add("tool", "tool_result", t=2.0, result=loop)
    recorder.close()
    last = json.loads(path.read_text().splitlines()[-1])
    assert (last["t"], last["lane"], last["kind"]) == (2.0, "tool", "tool_result")
    assert "self" in last["data"]
    assert recorder.events[-1].kind == "tool_result"


def _bot_and_model_events(trace: Path) -> list[tuple[str, dict]]:
    kinds = ("model_input", "generated", "played_text", "bot_started_speaking", "bot_stopped_speaking", "interruption")
    return [(e.kind, {**e.data, "t": e.t}) for e in Timeline.load(trace).events if e.kind in kinds]


def _kinds_in_order(trace: Path) -> list[tuple[str, str, float]]:
    return sorted((e.lane, e.kind, e.t) for e in Timeline.load(trace).events if e.lane != "control")


def test_a_placed_recorder_logs_what_observing_every_push_logs(tmp_path, monkeypatch):
    from pipecat_harness.sim.runner import run_scenario
    from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

    # A call with a barge-in: a cut-off reply's played seconds and the context after it.
    scenario = load_scenario(BUNDLED_DIR / "barge_in_after_refund.yaml")
    placed = run_scenario(scenario, trace_dir=tmp_path / "placed")
    monkeypatch.setattr(TraceRecorder, "listen", lambda self, processors, entry=None: False)
    observing = run_scenario(scenario, trace_dir=tmp_path / "observing")
    assert placed.as_expected and observing.as_expected
    events = _bot_and_model_events(tmp_path / "placed" / f"{scenario.name}.jsonl")
    assert events == _bot_and_model_events(tmp_path / "observing" / f"{scenario.name}.jsonl")
    every = [_kinds_in_order(tmp_path / arm / f"{scenario.name}.jsonl") for arm in ("placed", "observing")]
    assert every[0] == every[1]  # caller, tool and history records too, once each, at the same times
    assert [k for k, _ in events].count("model_input") >= 2
    assert any(k == "bot_stopped_speaking" and d["played_secs"] > 1.0 for k, d in events)


def test_the_harness_places_its_recorder_on_the_llm_and_the_output_transport(tmp_path):
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair

    from pipecat_harness.config import HarnessConfig
    from pipecat_harness.harness import Harness
    from pipecat_harness.sim.scenario import ModelScript
    from pipecat_harness.sim.scripted_llm import ScriptedLLMService
    from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
    from pipecat_harness.sim.sim_tts import SimulatedTTSService

    harness = Harness(HarnessConfig().only("history"), trace_path=tmp_path / "call.jsonl")
    pair = LLMContextAggregatorPair(LLMContext())
    harness.place([pair.user(), ScriptedLLMService(ModelScript()), SimulatedTTSService(),
                   SimulatedOutputTransport(), pair.assistant()])
    assert harness.recorder is not None and harness.recorder.listening
    assert not harness.recorder.observe_every_push
    harness.close()


def test_a_decision_is_logged_as_it_was_made_even_when_its_evidence_cannot_be_copied(tmp_path):
    import threading

    from pipecat_harness.decisions import DecisionLog

    decisions = DecisionLog("c")
    path = tmp_path / "call.jsonl"
    recorder = TraceRecorder(path, call_id="c", decisions=decisions)
    evidence = {"words": ["W", "two"], "lock": threading.Lock()}
    decisions.record("identifier_hold", "held", evidence)
    evidence["words"].append("three")  # the control goes on with its own mapping
    recorder.close()
    [decision] = [json.loads(line) for line in path.read_text().splitlines() if '"kind": "decision"' in line]
    assert decision["action"] == "held" and decision["evidence"]["words"] == ["W", "two"]
    assert "lock" in decision["evidence"]
