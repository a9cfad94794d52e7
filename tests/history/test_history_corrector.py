import copy
from typing import Any

from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test

from pipecat_harness.history import CorrectionPolicy, HistoryCorrector, PlaybackTracker
from tests.history.history_frames import reply_end, reply_start, sentence, settle

FIRST = "All set, I have refunded forty five dollars to your card."
SECOND = "You will see it on your statement within five to seven business days."
MARKER = "[cut off here]"

TOOL_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "I want a refund."},
    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                          "function": {"name": "issue_refund", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "refunded"}'},
]


class Recorder:
    def __init__(self) -> None:
        self.decisions: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, action: str, evidence: dict[str, Any]) -> None:
        self.decisions.append((action, evidence))


async def _run(frames: list[Frame], *, policy: CorrectionPolicy | None = None,
               messages: list[dict[str, Any]] | None = None) -> tuple[LLMContext, Recorder, HistoryCorrector]:
    context = LLMContext(messages=copy.deepcopy(messages if messages is not None else TOOL_MESSAGES))
    tracker = PlaybackTracker()
    recorder = Recorder()
    corrector = HistoryCorrector(tracker, policy=policy or CorrectionPolicy(marker_text=MARKER), on_decision=recorder)
    await run_test(Pipeline([tracker, LLMAssistantAggregator(context), corrector]), frames_to_send=frames)
    return context, recorder, corrector


def _cut_before_audio(text: str, context_id: str) -> list[Frame]:
    return [*reply_start(context_id), *sentence(text, context_id, 3.0, played=0.0), settle(), InterruptionFrame(),
            settle()]


def _assistant_texts(context: LLMContext) -> list[str]:
    return [m["content"] for m in context.get_messages()
            if m.get("role") == "assistant" and isinstance(m.get("content"), str)]


async def test_cut_in_the_second_sentence_keeps_the_heard_prefix_and_marks_it() -> None:
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0), *sentence(SECOND, "c1", 4.0, played=1.0),
              settle(), InterruptionFrame()]
    context, recorder, _ = await _run(frames)
    texts = _assistant_texts(context)
    assert len(texts) == 1
    assert texts[0].startswith(FIRST + " You will")
    assert texts[0].endswith(MARKER)
    heard = texts[0].removesuffix(MARKER).strip()
    assert (FIRST + " " + SECOND).startswith(heard)
    assert context.get_messages()[:3] == TOOL_MESSAGES  # tool call and result untouched
    action, evidence = recorder.decisions[-1]
    assert action == "truncated"
    assert evidence["pipecat_committed_text"] == FIRST  # Pipecat dropped the partly played sentence
    assert evidence["played_secs"] == 4.0
    assert evidence["chars_kept"] == len(heard)
    assert evidence["method"] == "speaking_rate"


async def test_uninterrupted_reply_is_left_exactly_as_pipecat_committed_it() -> None:
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0), *sentence(SECOND, "c1", 4.0), *reply_end("c1"),
              settle(), InterruptionFrame()]
    context, recorder, corrector = await _run(frames)
    assert context.get_messages() == [*TOOL_MESSAGES, {"role": "assistant", "content": f"{FIRST} {SECOND}"}]
    assert [a for a, _ in recorder.decisions] == ["played_in_full"]
    assert corrector.corrections == []


async def test_interruption_before_any_audio_removes_the_reply_but_not_the_tools() -> None:
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0, played=0.0), settle(), InterruptionFrame(), settle()]
    context, recorder, _ = await _run(frames)
    assert context.get_messages() == TOOL_MESSAGES
    assert recorder.decisions[-1][0] == "removed"
    assert recorder.decisions[-1][1]["reason"] == "no audio played"


async def test_word_committed_by_pipecat_but_not_heard_is_removed() -> None:
    # Pipecat committed the first sentence; only a sliver of the second played.
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0), *sentence(SECOND, "c1", 4.0, played=0.04),
              settle(), InterruptionFrame()]
    context, _, _ = await _run(frames, policy=CorrectionPolicy(marker=False))
    assert _assistant_texts(context) == [FIRST]


async def test_same_reply_removed_twice_is_kept_the_third_time() -> None:
    frames: list[Frame] = []
    for n in range(3):
        frames += _cut_before_audio(FIRST, f"c{n}")
    context, recorder, _ = await _run(frames, messages=[])
    assert [a for a, _ in recorder.decisions] == ["removed", "removed", "retained"]
    assert recorder.decisions[-1][1]["removed_before"] == 2
    assert _assistant_texts(context) == [FIRST]


async def test_different_replies_do_not_count_towards_the_same_removals() -> None:
    frames: list[Frame] = []
    for n, text in enumerate([FIRST, SECOND, "Is there anything else I can help with?"]):
        frames += _cut_before_audio(text, f"c{n}")
    context, recorder, _ = await _run(frames, messages=[])
    assert [a for a, _ in recorder.decisions] == ["removed", "removed", "removed"]
    assert _assistant_texts(context) == []


async def test_marker_can_be_switched_off() -> None:
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0), *sentence(SECOND, "c1", 4.0, played=2.0),
              settle(), InterruptionFrame()]
    context, _, _ = await _run(frames, policy=CorrectionPolicy(marker=False))
    text = _assistant_texts(context)[0]
    assert "[" not in text
    assert (FIRST + " " + SECOND).startswith(text)


async def test_empty_reply_and_repeated_interruptions_change_nothing() -> None:
    frames = [LLMFullResponseStartFrame(), LLMFullResponseEndFrame(), settle(), InterruptionFrame(),
              settle(), InterruptionFrame()]
    context, recorder, _ = await _run(frames)
    assert context.get_messages() == TOOL_MESSAGES
    assert recorder.decisions == []


async def test_emoji_only_reply_interrupted_leaves_no_message() -> None:
    frames = [*reply_start("c1"), *sentence("... 🙂", "c1", 0.5, played=0.2), settle(), InterruptionFrame()]
    context, recorder, _ = await _run(frames)
    assert context.get_messages() == TOOL_MESSAGES
    assert recorder.decisions[-1][0] == "removed"
    assert recorder.decisions[-1][1]["reason"] == "no words in the text"


async def test_non_latin_reply_is_cut_inside_the_text() -> None:
    text = "ご注文の返金が完了しました。"
    frames = [*reply_start("c1"), *sentence(text, "c1", 3.0, played=1.2), settle(), InterruptionFrame()]
    context, _, _ = await _run(frames, policy=CorrectionPolicy(marker=False))
    kept = _assistant_texts(context)
    assert len(kept) == 1 and text.startswith(kept[0]) and 0 < len(kept[0]) < len(text)


class _DropsReleasedText(FrameProcessor):
    """Loses released sentence text on its way to the aggregator, as the #4996 race does."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSTextFrame):
            return
        await self.push_frame(frame, direction)


async def test_words_lost_before_the_aggregator_are_restored_from_playback() -> None:
    context = LLMContext(messages=[])
    tracker = PlaybackTracker()
    corrector = HistoryCorrector(tracker, policy=CorrectionPolicy(marker=False))
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0), *sentence(SECOND, "c1", 4.0, played=3.0),
              settle(), InterruptionFrame()]
    pipeline = Pipeline([tracker, _DropsReleasedText(), LLMAssistantAggregator(context), corrector])
    await run_test(pipeline, frames_to_send=frames)
    kept = _assistant_texts(context)
    assert len(kept) == 1
    assert kept[0].startswith(FIRST + " You will see it on your statement")


async def test_without_an_assistant_aggregator_it_passes_frames_and_changes_nothing() -> None:
    tracker = PlaybackTracker()
    corrector = HistoryCorrector(tracker)
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0, played=1.0), settle(), InterruptionFrame()]
    down, _ = await run_test(Pipeline([tracker, corrector]), frames_to_send=frames)
    assert corrector.context is None
    assert corrector.corrections == []
    assert any(isinstance(f, InterruptionFrame) for f in down)


async def test_next_reply_already_playing_when_the_previous_commit_arrives() -> None:
    other = "Is there anything else I can help with today?"
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0), *reply_end("c1"),
              *reply_start("c2"), *sentence(other, "c2", 3.0, played=1.0), settle(), InterruptionFrame()]
    context, recorder, _ = await _run(frames, messages=[])
    texts = _assistant_texts(context)
    assert texts[0] == FIRST
    assert len(texts) == 2 and texts[1].startswith("Is there") and texts[1].endswith(MARKER)
    assert [a for a, _ in recorder.decisions] == ["played_in_full", "truncated"]
