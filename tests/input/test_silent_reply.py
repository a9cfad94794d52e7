"""SilentReplyGuard beside Pipecat's stop strategy, in the real LLMUserAggregator with its EmptyUserTurnConfig."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    LLMContextAssistantTurnFrame,
    LLMContextFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.empty_user_turn import EmptyUserTurnConfig
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_harness.input.silent_reply import (
    DEFAULT_REASK_PROMPT,
    SilentReplyGuard,
    is_yes_no_question,
    reask_instruction,
)

WINDOW = 0.3
WATCHDOG = 3.0


def _aggregator(empty_user_turn: EmptyUserTurnConfig | None = None, **guard_args: Any,
                ) -> tuple[LLMUserAggregator, SilentReplyGuard, LLMContext, list[tuple[str, dict[str, Any]]]]:
    decisions: list[tuple[str, dict[str, Any]]] = []
    guard = SilentReplyGuard(
        window_secs=WINDOW, on_decision=lambda action, evidence: decisions.append((action, evidence)), **guard_args
    )
    context = LLMContext()
    params = LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(
            stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.1), guard]),
        user_turn_stop_timeout=WATCHDOG,
    )
    if empty_user_turn is not None:
        params.empty_user_turn = empty_user_turn
    aggregator = LLMUserAggregator(context, params=params)
    guard.attach(aggregator)
    return aggregator, guard, context, decisions


def _asked(question: str) -> Frame:
    return LLMContextAssistantTurnFrame(text=question, timestamp="t")


def _silent_reply() -> list[Frame]:
    return [VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.1), VADUserStoppedSpeakingFrame()]


def _developer(context: LLMContext) -> list[str]:
    return [str(m["content"]) for m in context.get_messages() if m.get("role") == "developer"]


async def test_silent_mm_hmm_to_an_inferred_confirmation_is_reasked_once_through_pipecats_recovery() -> None:
    aggregator, guard, context, decisions = _aggregator()
    frames = [
        _asked("I can refund $45 to your card. Shall I go ahead?"),
        *_silent_reply(),
        SleepFrame(sleep=WINDOW + 0.2),
        *_silent_reply(),  # silent again: the maximum of one re-ask is reached
        SleepFrame(sleep=WINDOW + 0.2),
        VADUserStartedSpeakingFrame(),
        TranscriptionFrame(text="yes", user_id="caller", timestamp="t"),
        VADUserStoppedSpeakingFrame(),
        SleepFrame(sleep=0.5),
    ]
    down, _ = await run_test(aggregator, frames_to_send=frames)
    # Pipecat's empty-turn recovery ran the model once with the re-ask; no speech was pushed beside it.
    assert _developer(context) == [reask_instruction(guard.prompt)]
    assert not any(isinstance(f, TTSSpeakFrame) for f in down)
    assert sum(isinstance(f, LLMContextFrame) for f in down) == 2  # the re-ask, then the answer
    assert [a for a, _ in decisions] == ["reasked", "not_reasked"]
    assert decisions[0][1]["pending"] == "inferred"
    assert decisions[0][1]["added_wait_ms"] == WINDOW * 1000
    # The answer after the re-ask still reaches the model through the aggregator.
    assert [m["content"] for m in context.get_messages() if m.get("role") == "user"] == ["yes"]
    # The bot's own empty-turn config is untouched outside the re-ask.
    config = aggregator._params.empty_user_turn
    assert config is not None and config.idle_prompt is None and config.max_consecutive_recoveries == 1


async def test_application_sets_the_pending_confirmation_and_prompt() -> None:
    aggregator, guard, context, decisions = _aggregator(prompt="Should I place the order, yes or no?", max_reasks=2)
    guard.expect_confirmation(True)
    frames = [*_silent_reply(), SleepFrame(sleep=WINDOW + 0.2), *_silent_reply(), SleepFrame(sleep=WINDOW + 0.2)]
    await run_test(aggregator, frames_to_send=frames)
    assert _developer(context) == [reask_instruction("Should I place the order, yes or no?")] * 2
    assert [e["pending"] for _, e in decisions] == ["application", "application"]


async def test_recovery_switched_off_by_the_bot_is_respected() -> None:
    aggregator, guard, context, decisions = _aggregator()
    aggregator._params.empty_user_turn = None
    guard.expect_confirmation(True)
    await run_test(aggregator, frames_to_send=[*_silent_reply(), SleepFrame(sleep=WINDOW + 0.2)])
    assert _developer(context) == []
    assert [a for a, _ in decisions] == ["not_reasked"] and "empty_user_turn=None" in decisions[0][1]["reason"]


@pytest.mark.parametrize(
    "frames",
    [
        # No confirmation pending: an open question.
        [_asked("What is your order number?"), *_silent_reply(), SleepFrame(sleep=WINDOW + 0.3)],
        # Confirmation pending, but the caller's answer was transcribed.
        [
            _asked("Shall I cancel it?"),
            VADUserStartedSpeakingFrame(),
            TranscriptionFrame(text="no thanks", user_id="caller", timestamp="t"),
            VADUserStoppedSpeakingFrame(),
            SleepFrame(sleep=WINDOW + 0.3),
        ],
        # Speech that interrupted the bot is left to Pipecat's own interrupted-turn recovery.
        [
            _asked("Shall I cancel it?"),
            BotStartedSpeakingFrame(),
            VADUserStartedSpeakingFrame(),
            BotStoppedSpeakingFrame(),
            VADUserStoppedSpeakingFrame(),
            SleepFrame(sleep=WINDOW + 0.3),
        ],
    ],
    ids=["open_question", "transcribed_answer", "barge_in"],
)
async def test_stays_out_of_the_way(frames: list[Frame]) -> None:
    aggregator, guard, context, decisions = _aggregator()
    await run_test(aggregator, frames_to_send=frames)
    assert reask_instruction(guard.prompt) not in _developer(context)
    assert [a for a, _ in decisions] in ([], ["deferred"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Shall I go ahead with the refund?", True),
        ("That's order W237, correct?", True),
        ("I found it. Do you want me to cancel it?", True),
        ("Okay, would you like the same address?", True),
        ("Is that right?", True),
        ("What is your order number?", False),
        ("Which item would you like to return?", False),
        ("I've cancelled it.", False),
        ("", False),
        ("¿Quiere continuar?", False),
    ],
)
def test_yes_no_question_inference(text: str, expected: bool) -> None:
    assert is_yes_no_question(text) is expected


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="window_secs"):
        SilentReplyGuard(window_secs=0)
    with pytest.raises(ValueError, match="prompt"):
        SilentReplyGuard(prompt="  ")


def test_reask_note_holds_no_assent_a_user_turn_could_carry():
    """Gemini, Anthropic and Bedrock get the developer note as a user turn: no word of it may read as a yes."""
    from pipecat_harness.business.replies import _ASSENT_PHRASES

    words = " ".join(re.findall(r"[a-z']+", reask_instruction(DEFAULT_REASK_PROMPT).lower()))
    assert [p for p in _ASSENT_PHRASES if re.search(rf"\b{re.escape(p)}\b", words)] == []
