from pipecat.frames.frames import (
    AggregatedTextFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TextType,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameProcessor

from pipecat_harness.config import HarnessConfig
from pipecat_harness.harness import CONTROL_FACTORIES, Harness
from pipecat_harness.history import HistoryCorrector, PlaybackTracker, SynthesisObserver
from pipecat_harness.history.control import HistoryControl
from pipecat_harness.placement import flatten
from pipecat_harness.sim.scenario import ModelScript
from pipecat_harness.sim.scripted_llm import ScriptedLLMService
from pipecat_harness.sim.sim_transport import SimulatedOutputTransport
from pipecat_harness.sim.sim_tts import SimulatedTTSService


def _harness(**history: object) -> Harness:
    config = HarnessConfig().only("history")
    config = config.model_copy(update={"history": config.history.model_copy(update=history)})
    return Harness(config, call_id="history-control-test")


def test_registered_under_its_name() -> None:
    assert CONTROL_FACTORIES["history"] == "pipecat_harness.history.control:HistoryControl"


def test_places_tracker_after_transport_and_corrector_after_aggregator() -> None:
    harness = _harness()
    control = harness.control("history")
    assert isinstance(control, HistoryControl)
    pair = LLMContextAggregatorPair(LLMContext())
    tts, transport = SimulatedTTSService(), SimulatedOutputTransport()
    placed: list[FrameProcessor] = harness.place([pair.user(), tts, transport, pair.assistant()])
    kinds = [type(p) for p in flatten(placed)]
    assert kinds.index(PlaybackTracker) == kinds.index(SimulatedOutputTransport) + 1
    assert kinds.index(HistoryCorrector) == len(kinds) - 1
    assert any(isinstance(o, SynthesisObserver) for o in harness.observers()[0].members)


def test_synthesis_observer_listens_to_the_placed_llm_and_tts_instead_of_the_worker() -> None:
    harness = _harness()
    control = harness.control("history")
    assert isinstance(control, HistoryControl)
    pair = LLMContextAggregatorPair(LLMContext())
    llm, tts = ScriptedLLMService(ModelScript()), SimulatedTTSService()
    harness.place([pair.user(), llm, tts, SimulatedOutputTransport(), pair.assistant()])
    assert control.tracker.observer.listening
    members = [m for group in harness.observers() for m in group.members]  # type: ignore[attr-defined]
    assert not any(isinstance(m, SynthesisObserver) for m in members)


async def test_listening_synthesis_observer_notes_what_the_services_push() -> None:
    observer = SynthesisObserver()
    llm, tts = ScriptedLLMService(ModelScript()), SimulatedTTSService()
    observer.listen(llm, tts)
    start = LLMFullResponseStartFrame()
    for frame in (start, LLMTextFrame("Hello "), LLMTextFrame("there.")):
        await llm.push_frame(frame)
    sentence = AggregatedTextFrame("Hello there.", TextType.SENTENCE)
    sentence.context_id = "c1"
    audio = TTSAudioRawFrame(audio=b"\0" * 32000, sample_rate=16000, num_channels=1, context_id="c1")
    for frame in (sentence, audio, TTSStoppedFrame(context_id="c1")):
        await tts.push_frame(frame)
    assert observer.generated_text(start.id) == "Hello there."
    assert observer.audio_secs(sentence.id) == 1.0
    assert observer.synthesis_complete(sentence.id)


def test_settings_reach_the_corrector_and_tracker() -> None:
    harness = _harness(marker=False, marker_text="[cut]", keep_after_removals=3, bias=0.6, chars_per_sec=12.0)
    control = harness.control("history")
    assert isinstance(control, HistoryControl)
    assert control.corrector.policy.marker is False
    assert control.corrector.policy.marker_text == "[cut]"
    assert control.corrector.policy.keep_after_removals == 3
    assert control.tracker.bias == 0.6
    assert control.tracker.default_chars_per_sec == 12.0


def test_switched_off_places_nothing() -> None:
    harness = Harness(HarnessConfig().only(), call_id="history-off")
    assert harness.control("history") is None
