import asyncio
import sys

import pytest
from pipecat.frames.frames import Frame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_harness import harness as harness_module
from pipecat_harness._pipecat import function_registry
from pipecat_harness.config import HarnessConfig
from pipecat_harness.control import HarnessControl, Placement
from pipecat_harness.harness import Harness, TurnBoundaryProcessor
from pipecat_harness.placement import PlacementGroup, flatten
from pipecat_harness.sim.scenario import ModelScript
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService


class Marker(FrameProcessor):
    def __init__(self, label):
        super().__init__(name=label)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)


class ProbeControl(HarnessControl):
    name = "spelling"

    def processors(self):
        return [(placement, Marker(placement.value)) for placement in Placement]

    def wrap_stop_strategies(self, strategies):
        return [*strategies, "wrapped"]

    def wrap_function(self, name, handler, *, write):
        async def wrapped(params):
            self.record("forwarded", {"tool": name, "write": write})
            await handler(params)

        return wrapped


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setitem(harness_module.CONTROL_FACTORIES, "spelling", f"{__name__}:ProbeControl")
    return Harness(HarnessConfig().only("spelling"), call_id="c1", trace_path=None,
                   write_tools={"issue_refund"})


def pipeline_parts():
    pair = LLMContextAggregatorPair(LLMContext())
    llm = ScriptedLLMService(ModelScript())
    return [pair.user(), llm, SimulatedTTSService(), SimulatedOutputTransport(), pair.assistant()], llm


def test_processors_are_placed_at_their_anchors(probe):
    parts, _ = pipeline_parts()
    placed = probe.place(parts)
    names = [p.name if isinstance(p, Marker) else type(p).__name__ for p in flatten(placed)]
    user = names.index("LLMUserAggregator")
    assert names[user - 1] == "before_user_aggregator"
    assert names[user + 1] == "TurnBoundaryProcessor" and names[user + 2] == "before_llm"
    assert names[names.index("SimulatedOutputTransport") + 1] == "after_output_transport"
    assert names[names.index("LLMAssistantAggregator") + 1] == "after_assistant_aggregator"
    assert probe.active_controls == {"spelling"}


def test_each_placement_is_one_processor_of_the_pipeline(probe):
    parts, _ = pipeline_parts()
    placed = probe.place(parts)
    groups = [p for p in placed if isinstance(p, PlacementGroup)]
    assert [g.placement.value for g in groups] == [
        "before_user_aggregator", "before_llm", "after_output_transport", "after_assistant_aggregator"]
    assert isinstance(groups[1].members[0], TurnBoundaryProcessor)
    assert len(placed) == len(parts) + 4


def test_missing_anchor_is_a_clear_error(probe):
    with pytest.raises(ValueError, match="no LLMUserAggregator"):
        probe.place([ScriptedLLMService(ModelScript())])


def test_user_params_wrap_the_configured_stop_strategies(probe):
    stop = SpeechTimeoutUserTurnStopStrategy()
    params = probe.user_params(LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[stop])))
    assert params.user_turn_strategies.stop == [stop, "wrapped"]


def test_writes_are_not_cancelled_by_interruptions_and_handlers_are_wrapped(probe):
    _, llm = pipeline_parts()

    async def handler(params):
        pass

    probe.register_function(llm, "issue_refund", handler)
    probe.register_function(llm, "get_order_details", handler)
    assert llm._functions["issue_refund"].cancel_on_interruption is False
    assert llm._functions["get_order_details"].cancel_on_interruption is True
    assert llm._functions["issue_refund"].handler is not handler


def test_wrap_registered_functions_wraps_each_handler_once(probe):
    _, llm = pipeline_parts()

    async def handler(params):
        pass

    llm.register_function("issue_refund", handler)
    probe.wrap_registered_functions(llm)
    first = llm._functions["issue_refund"].handler
    probe.wrap_registered_functions(llm)
    assert first is not handler and llm._functions["issue_refund"].handler is first
    assert llm._functions["issue_refund"].cancel_on_interruption is False


def test_turn_boundary_advances_the_decision_turn(probe):
    seen = []
    boundary = TurnBoundaryProcessor(lambda text: seen.append((probe.decisions.next_turn(), text)))
    boundary._on_turn("hello")
    assert seen == [(1, "hello")]


class NormalizerProbe(ProbeControl):
    seen: list = []

    def set_argument_normalizer(self, name, normalizer):
        self.seen.append((name, normalizer({"order_id": "w1"})))


def test_argument_normalizers_reach_the_controls_before_wrapping(monkeypatch):
    monkeypatch.setitem(harness_module.CONTROL_FACTORIES, "spelling", f"{__name__}:NormalizerProbe")
    monkeypatch.setattr(NormalizerProbe, "seen", [])
    harness = Harness(HarnessConfig().only("spelling"), trace_path=None)
    _, llm = pipeline_parts()

    async def handler(arguments):
        return {}

    harness.register_tools(llm, {"issue_refund": handler, "get_order_details": handler},
                           normalizers={"issue_refund": lambda args: {**args, "order_id": "#W1"}})
    assert NormalizerProbe.seen == [("issue_refund", {"order_id": "#W1"})]


def test_controls_are_built_in_the_one_declared_order():
    from pipecat_harness.config import CONTROL_NAMES
    from pipecat_harness.harness import CONTROLS

    names = [name for name, _ in CONTROLS]
    assert sorted(names) == sorted(CONTROL_NAMES) and len(set(names)) == len(names)
    config = HarnessConfig().only(*CONTROL_NAMES)
    grader = config.grader.model_copy(update={"constraints_path": "bundled:retail"})
    config = config.model_copy(update={"grader": grader})
    harness = Harness(config, call_id="c-order", trace_path=None)
    assert [control.name for control in harness.controls] == names
    assert [type(control).__name__ for control in harness.controls] == [path.rpartition(":")[2] for _, path in CONTROLS]
    # The tool gate comes last: its handler wrapper is the outermost, so it decides whether a call runs.
    assert names[-1] == "tool_gate" and names.index("identifier_hold") < names.index("silent_reply")


def test_a_later_control_wraps_an_earlier_ones_tool_handler(monkeypatch):
    calls = []

    class First(HarnessControl):
        name = "identifier_hold"

        def wrap_function(self, name, handler, *, write):
            async def wrapped(params):
                calls.append(self.name)
                await handler(params)
            return wrapped

    class Second(First):
        name = "spelling"

    monkeypatch.setitem(harness_module.CONTROL_FACTORIES, "identifier_hold", f"{__name__}:_First")
    monkeypatch.setitem(harness_module.CONTROL_FACTORIES, "spelling", f"{__name__}:_Second")
    monkeypatch.setattr(sys.modules[__name__], "_First", First, raising=False)
    monkeypatch.setattr(sys.modules[__name__], "_Second", Second, raising=False)
    harness = Harness(HarnessConfig().only("spelling", "identifier_hold"), call_id="c", trace_path=None)
    assert [c.name for c in harness.controls] == ["identifier_hold", "spelling"]
    llm = ScriptedLLMService(ModelScript())

    async def handler(params):
        calls.append("handler")

    harness.register_function(llm, "lookup", handler, write=False)
    asyncio.run(function_registry(llm)["lookup"].handler(None))
    assert calls == ["spelling", "identifier_hold", "handler"]
