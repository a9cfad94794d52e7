"""Every Pipecat internal the harness touches, checked against the installed Pipecat.

Each function of :mod:`pipecat_harness._pipecat` is exercised on real Pipecat objects: when a Pipecat release moves
or renames the attribute, its test fails with the attribute's name (``PipecatInternalsChanged``), not with a
behaviour change found later on a call.
"""

import dataclasses
import inspect

import pytest
from pipecat.frames.frames import Frame, LLMTextFrame
from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.base_pipeline import BasePipeline
from pipecat.pipeline.worker_observer import WorkerObserver
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings
from pipecat.services.stt_service import STTService
from pipecat.turns.user_stop import (
    ExternalUserTurnStopStrategy,
    SpeechTimeoutUserTurnStopStrategy,
    TurnAnalyzerUserTurnStopStrategy,
)

from pipecat_harness import _pipecat
from pipecat_harness._pipecat import PipecatInternalsChanged


class LLM(LLMService):
    def __init__(self, **kwargs):
        fields = {f.name: None for f in dataclasses.fields(LLMSettings) if f.init}
        super().__init__(settings=LLMSettings(**{**fields, "system_instruction": "Be brief."}), **kwargs)
        self.pushed: list[Frame] = []

    async def push_frame(self, frame, direction=FrameDirection.DOWNSTREAM):
        self.pushed.append(frame)


class STT(STTService):
    async def run_stt(self, audio):
        yield None


async def handler(params):
    await params.result_callback({})


def test_function_registry_holds_what_register_function_stored():
    llm = LLM()
    llm.register_function("issue_refund", handler)
    registry = _pipecat.function_registry(llm)
    assert registry["issue_refund"].handler is handler


def test_a_replaced_function_registry_is_where_pipecat_stores_and_looks_up_handlers():
    llm = LLM()

    class Registry(dict):
        pass

    replacement = Registry()
    _pipecat.replace_function_registry(llm, replacement)
    llm.register_function("issue_refund", handler)
    assert replacement["issue_refund"].handler is handler
    assert llm.has_function("issue_refund")


def test_appended_entries_are_composed_after_the_base_system_instruction():
    llm = LLM()
    assert _pipecat.base_system_instruction(llm) == "Be brief."
    _pipecat.appended_system_instructions(llm).append("Ask for the order number.")
    _pipecat.recompose_system_instruction(llm)
    assert llm.settings.system_instruction.startswith("Be brief.\n\nAsk for the order number.")
    _pipecat.appended_system_instructions(llm).clear()
    _pipecat.recompose_system_instruction(llm)
    assert llm.settings.system_instruction == "Be brief."


async def test_push_llm_text_pushes_the_text_as_a_text_frame():
    llm = LLM()
    await _pipecat.push_llm_text(llm, "Done.")
    assert [f.text for f in llm.pushed if isinstance(f, LLMTextFrame)] == ["Done."]


def test_stt_user_id_is_the_id_transcripts_carry():
    assert _pipecat.stt_user_id(STT()) == ""


def test_user_aggregator_params_are_the_params_it_was_built_with():
    params = LLMUserAggregatorParams()
    user = LLMContextAggregatorPair(LLMContext(), user_params=params).user()
    assert _pipecat.user_aggregator_params(user) is params


def test_stop_strategy_timeouts_and_analyzer():
    assert _pipecat.speech_timeout(SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.9)) == 0.9
    assert _pipecat.external_stop_timeout(ExternalUserTurnStopStrategy(timeout=0.7)) == 0.7
    analyzer = object()
    assert _pipecat.turn_analyzer(TurnAnalyzerUserTurnStopStrategy(turn_analyzer=analyzer)) is analyzer


def test_direct_mode_and_neighbours():
    a, b = FrameProcessor(enable_direct_mode=True), FrameProcessor()
    assert _pipecat.in_direct_mode(a) and not _pipecat.in_direct_mode(b)
    _pipecat.set_neighbours(a, following=b)
    _pipecat.set_neighbours(b, previous=a)
    assert a.next is b and b.previous is a and a.previous is None


def test_setup_hooks_hold_and_release_the_start_frame():
    processor = FrameProcessor()
    done = processor._FrameProcessor__setup_done  # what the two hooks hold and release
    done.set()
    _pipecat.mark_setup_started(processor)
    assert not done.is_set()
    done.set()
    _pipecat.mark_setup_started(processor, base=True)
    assert not done.is_set()
    assert list(inspect.signature(FrameProcessor._setup_finished).parameters) == ["self"]


def test_a_pipeline_sets_up_and_cleans_up_contained_processors():
    for name in ("_setup_processors", "_cleanup_processors"):
        method = getattr(BasePipeline, name, None)
        assert method is not None and inspect.iscoroutinefunction(method), f"BasePipeline.{name}"
    assert list(inspect.signature(BasePipeline._setup_processors).parameters) == ["self", "processors", "setup"]
    assert list(inspect.signature(BasePipeline._cleanup_processors).parameters) == ["self", "processors"]


def test_worker_observers_are_the_list_add_observer_extends():
    first, later = BaseObserver(), BaseObserver()
    worker_observer = WorkerObserver(observers=[first])
    observers = _pipecat.worker_observers(worker_observer)
    worker_observer.add_observer(later)
    assert observers == [first, later]


@pytest.mark.parametrize(("call", "owner", "attribute"), [
    (lambda o: _pipecat.function_registry(o), LLM, "_functions"),
    (lambda o: _pipecat.appended_system_instructions(o), LLM, "_appended_system_instructions"),
    (lambda o: _pipecat.base_system_instruction(o), LLM, "_base_system_instruction"),
    (lambda o: _pipecat.in_direct_mode(o), FrameProcessor, "_enable_direct_mode"),
    (lambda o: _pipecat.set_neighbours(o, following=None), FrameProcessor, "_next"),
    (lambda o: _pipecat.worker_observers(o), WorkerObserver, "_observers"),
])
def test_a_moved_internal_is_named_in_the_error(call, owner, attribute):
    instance = owner()
    object.__delattr__(instance, attribute)  # as if Pipecat stopped setting it
    with pytest.raises(PipecatInternalsChanged, match=rf"has no '{attribute}'.*pipecat-ai 1\.14"):
        call(instance)
