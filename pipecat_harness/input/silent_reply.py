"""``SilentReplyGuard``: re-ask a pending confirmation when the caller spoke but no transcript came.

How Pipecat 1.14 treats such a reply: VAD opens a user turn, the STT returns
nothing (Deepgram drops empty finals), the stop strategies wait for a
transcript that never comes, and the ``user_turn_stop_timeout`` watchdog (5 s)
ends the turn empty. The aggregator's ``EmptyUserTurnConfig`` then runs the
model with a developer message, but by default only when the turn *interrupted*
the bot: an empty turn while the bot was idle (the caller's "mm-hmm" after
"Shall I go ahead?") gets no answer, so the call stalls and the confirmation
never reaches the model.

The guard builds on that mechanism rather than speaking beside it. It is a
user-turn stop strategy that runs next to the bot's own, so it sees the turn
boundaries of Pipecat's turn controller, the VAD and transcript frames, the
bot's speech and the assistant turns. It adds two things:

* **scope**: only while a confirmation is pending — set with
  :meth:`SilentReplyGuard.expect_confirmation` or inferred from an assistant
  turn ending in a yes/no question — and at most ``max_reasks`` times in a row
  (a transcript resets the count);
* **window**: an empty turn in scope ends ``window_secs`` after the caller went
  quiet (well inside the watchdog), with the aggregator's recovery prompts set
  to the re-ask for that one turn end, so Pipecat's own empty-turn recovery
  asks the model to re-ask.

A silent reply that interrupted the bot is left to Pipecat's interrupted-turn
recovery, so the two never ask twice.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    LLMContextAssistantTurnFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy

from pipecat_harness._pipecat import user_aggregator_params

__all__ = ["DEFAULT_REASK_PROMPT", "SilentReplyGuard", "is_yes_no_question", "reask_instruction"]

# Free of assent words: Gemini, Anthropic and Bedrock receive the re-ask note as a user turn, where a "yes" in
# it would read as the caller agreeing.
DEFAULT_REASK_PROMPT = "Sorry, I didn't catch your answer. Could you say it again?"

_AUXILIARIES = frozenset(
    "shall should can could would will do does did is are was were may might have has am want wanna".split()
)
_TAGS = re.compile(r"(?:\b(?:right|okay|ok|correct|alright|yes or no|is that (?:right|correct|ok|okay)))\s*\?$", re.I)


def is_yes_no_question(text: str) -> bool:
    """Whether ``text`` ends in a question answered by yes or no.

    "Shall I go ahead with the refund?" and "That's order W237, correct?" are;
    "What is your order number?" is not.
    """
    text = text.strip()
    if not text.endswith("?"):
        return False
    if _TAGS.search(text):
        return True
    last = re.split(r"(?<=[.!?])\s+", text)[-1]
    first = re.findall(r"[A-Za-z']+", last)
    if not first:
        return False
    word = first[0].lower()
    if word in ("so", "and", "ok", "okay", "now", "then", "great", "alright") and len(first) > 1:
        word = first[1].lower()
    return word in _AUXILIARIES or word.endswith("n't")


def reask_instruction(prompt: str) -> str:
    """The developer message Pipecat's empty-turn recovery gives the model for a silent confirmation."""
    return (
        "The caller answered your last question, but their answer was not recognized, and nothing has been "
        f'done yet. Ask them again, briefly, for example: "{prompt}"'
    )


class SilentReplyGuard(BaseUserTurnStopStrategy):
    """Ends a silent reply to a pending confirmation early and lets Pipecat's empty-turn recovery re-ask.

    Place it in the user aggregator's stop strategies beside the bot's own (the
    harness does, through :meth:`~pipecat_harness.harness.Harness.user_params`)
    and :meth:`attach` it to that aggregator, whose ``EmptyUserTurnConfig`` it
    scopes.

    Args:
        window_secs: How long after the caller stops speaking a transcript may take.
        max_reasks: Re-asks in a row before giving up (until a transcript arrives).
        prompt: The re-ask the model is asked to make.
        infer_from_assistant: Treat an assistant turn ending in a yes/no question as a pending confirmation.
        on_decision: Called with ``(action, evidence)`` for each re-ask or refusal.
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.

    Raises:
        ValueError: A setting is out of range (its name is in the message).
    """

    def __init__(
        self,
        *,
        window_secs: float = 1.5,
        max_reasks: int = 1,
        prompt: str = DEFAULT_REASK_PROMPT,
        infer_from_assistant: bool = True,
        on_decision: Callable[[str, dict[str, Any]], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if window_secs <= 0:
            raise ValueError("window_secs must be positive")
        if max_reasks < 0:
            raise ValueError("max_reasks must not be negative")
        if not prompt.strip():
            raise ValueError("prompt must not be empty")
        self.window_secs = window_secs
        self.max_reasks = max_reasks
        self.prompt = prompt
        self.infer_from_assistant = infer_from_assistant
        self._on_decision = on_decision
        self._aggregator: Any = None
        self._app_pending: bool | None = None
        self._inferred_pending = False
        self._last_assistant = ""
        self._reasks = 0
        self._bot_speaking = False
        self._speaking = False
        self._in_turn = False
        self._turn_interrupted_bot = False
        self._transcript_seen = False
        self._timer: asyncio.Task[None] | None = None

    @property
    def pending_confirmation(self) -> bool:
        """Whether a yes/no answer is awaited (the application's setting wins over inference)."""
        return self._app_pending if self._app_pending is not None else self._inferred_pending

    def expect_confirmation(self, pending: bool | None = True) -> None:
        """Set by the application: a confirmation is (or is no longer) pending; ``None`` restores inference."""
        self._app_pending = pending

    def attach(self, aggregator: Any) -> None:
        """Use ``aggregator``'s empty-turn recovery (an ``LLMUserAggregator`` running this strategy)."""
        self._aggregator = aggregator

    # --- turn boundaries of Pipecat's controller --------------------------------------------------------

    async def handle_user_turn_started(self) -> None:
        """A user turn opened: watch whether it gets a transcript."""
        await self._cancel_timer()
        self._in_turn = True
        self._transcript_seen = False
        self._turn_interrupted_bot = self._bot_speaking

    async def handle_user_turn_stopped(self) -> None:
        """The turn ended (by any strategy or the watchdog): nothing left to time."""
        await self._cancel_timer()
        self._in_turn = False

    async def cleanup(self) -> None:
        """Stop the window timer."""
        await super().cleanup()
        await self._cancel_timer()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        """Watch caller speech, transcripts, the bot's speech and assistant turns; never stops other strategies."""
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._speaking = True
            await self._cancel_timer()
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._speaking = False
            if self._in_turn and self.pending_confirmation and not self._transcript_seen and self._timer is None:
                self._timer = self.create_task(self._window(), "silent_reply_window")
        elif isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            self._transcript_seen = True
            await self._cancel_timer()
            if isinstance(frame, TranscriptionFrame) and frame.text.strip():
                # The answer reaches the model; the confirmation is no longer this guard's concern.
                self._reasks = 0
                self._inferred_pending = False
                if self._app_pending:
                    self._app_pending = None
        elif isinstance(frame, LLMContextAssistantTurnFrame):
            self._last_assistant = frame.text or ""
            self._inferred_pending = self.infer_from_assistant and is_yes_no_question(self._last_assistant)
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
        return ProcessFrameResult.CONTINUE

    # --- the window -------------------------------------------------------------------------------------

    async def _window(self) -> None:
        try:
            await asyncio.sleep(self.window_secs)
        except asyncio.CancelledError:
            return
        self._timer = None
        if self._transcript_seen or self._speaking or not self._in_turn or not self.pending_confirmation:
            return
        evidence: dict[str, Any] = {
            "window_ms": round(self.window_secs * 1000),
            "added_wait_ms": round(self.window_secs * 1000),
            "pending": "application" if self._app_pending else "inferred",
            "last_assistant": self._last_assistant[-200:],
            "reasks": self._reasks,
        }
        if self._turn_interrupted_bot:
            self._record("deferred", {**evidence, "reason": "the reply interrupted the bot: Pipecat's "
                                                            "interrupted-turn recovery answers it"})
            return
        if self._reasks >= self.max_reasks:
            self._record("not_reasked", {**evidence, "reason": f"already re-asked {self._reasks} time(s)"})
            return
        params = None if self._aggregator is None else user_aggregator_params(self._aggregator)
        config = getattr(params, "empty_user_turn", None)
        if config is None:
            reason = ("no user aggregator attached" if self._aggregator is None
                      else "the aggregator's empty-turn recovery is off (empty_user_turn=None, or realtime mode)")
            self._record("not_reasked", {**evidence, "reason": reason})
            return
        instruction = reask_instruction(self.prompt)
        saved = (config.idle_prompt, config.interrupted_prompt, config.max_consecutive_recoveries)
        # The re-ask is scoped to this one turn end: the bot's own config is back before anything else runs.
        # Both prompts: Pipecat counts a turn before the bot's first words as interrupting it.
        config.idle_prompt = config.interrupted_prompt = instruction
        config.max_consecutive_recoveries = saved[2] + self.max_reasks
        try:
            await self.trigger_user_turn_stopped()
        finally:
            config.idle_prompt, config.interrupted_prompt, config.max_consecutive_recoveries = saved
        if self._recovered(instruction):
            self._reasks += 1
            self._record("reasked", {**evidence, "prompt": self.prompt, "reasks": self._reasks,
                                     "via": "EmptyUserTurnConfig"})
        else:
            self._record("not_reasked", {**evidence, "reason": "Pipecat left the empty turn unanswered "
                                                               "(caller muted or a function call running)"})

    def _recovered(self, instruction: str) -> bool:
        context = getattr(self._aggregator, "context", None)
        messages = context.get_messages() if context is not None else []
        return bool(messages) and messages[-1].get("role") == "developer" and messages[-1].get("content") == instruction

    async def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            await self.cancel_task(self._timer)
        self._timer = None

    def _record(self, action: str, evidence: dict[str, Any]) -> None:
        if self._on_decision is not None:
            self._on_decision(action, evidence)
