"""``SilentReplyGuard``: re-ask a pending confirmation when the caller spoke but no transcript came.

Pipecat answers an empty turn only when it interrupted the bot, so a lost "mm-hmm" after "Shall I go ahead?"
stalls the call. The guard ends such a turn ``window_secs`` after the caller went quiet, while a confirmation
is pending, with the aggregator's ``EmptyUserTurnConfig`` prompts set to the re-ask.
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

_AUXILIARIES = frozenset("shall should can could would will do does did is are was were may might have has am want "
                         "wanna".split())
_TAGS = re.compile(r"(?:\b(?:right|okay|ok|correct|alright|yes or no|is that (?:right|correct|ok|okay)))\s*\?$", re.I)


def is_yes_no_question(text: str) -> bool:
    """Whether ``text`` ends in a yes/no question ("Shall I go ahead?", "That's W237, correct?")."""
    text = text.strip()
    if not text.endswith("?"):
        return False
    if _TAGS.search(text):
        return True
    words = re.findall(r"[a-z']+", re.split(r"(?<=[.!?])\s+", text)[-1].lower())
    if len(words) > 1 and words[0] in ("so", "and", "ok", "okay", "now", "then", "great", "alright"):
        words = words[1:]
    return bool(words) and (words[0] in _AUXILIARIES or words[0].endswith("n't"))


def reask_instruction(prompt: str) -> str:
    """The developer message Pipecat's empty-turn recovery gives the model for a silent confirmation."""
    return ("The caller answered your last question, but their answer was not recognized, and nothing has been "
            f'done yet. Ask them again, briefly, for example: "{prompt}"')


class SilentReplyGuard(BaseUserTurnStopStrategy):
    """Ends a silent reply to a pending confirmation early and lets Pipecat's empty-turn recovery re-ask.

    Place it beside the bot's own stop strategies and :meth:`attach` it to the user aggregator. The settings are
    :class:`~pipecat_harness.config.SilentReplySettings` (``ValueError`` names one out of range); ``on_decision``
    gets ``(action, evidence)`` of each re-ask or refusal.
    """

    def __init__(self, *, window_secs: float = 1.5, max_reasks: int = 1, prompt: str = DEFAULT_REASK_PROMPT,
                 infer_from_assistant: bool = True, on_decision: Callable[[str, dict[str, Any]], Any] | None = None,
                 **kwargs: Any) -> None:
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

    async def _window(self) -> None:
        try:
            await asyncio.sleep(self.window_secs)
        except asyncio.CancelledError:
            return
        self._timer = None
        if self._transcript_seen or self._speaking or not self._in_turn or not self.pending_confirmation:
            return
        evidence: dict[str, Any] = {
            "window_ms": round(self.window_secs * 1000), "added_wait_ms": round(self.window_secs * 1000),
            "pending": "application" if self._app_pending else "inferred",
            "last_assistant": self._last_assistant[-200:], "reasks": self._reasks}
        if self._turn_interrupted_bot:
            reason = "the reply interrupted the bot: Pipecat's interrupted-turn recovery answers it"
            self._record("deferred", evidence, reason=reason)
            return
        if self._reasks >= self.max_reasks:
            self._record("not_reasked", evidence, reason=f"already re-asked {self._reasks} time(s)")
            return
        params = None if self._aggregator is None else user_aggregator_params(self._aggregator)
        config = getattr(params, "empty_user_turn", None)
        if config is None:
            off = "the aggregator's empty-turn recovery is off (empty_user_turn=None, or realtime mode)"
            reason = off if self._aggregator is not None else "no user aggregator attached"
            self._record("not_reasked", evidence, reason=reason)
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
            self._record("reasked", evidence, prompt=self.prompt, reasks=self._reasks, via="EmptyUserTurnConfig")
        else:
            reason = "Pipecat left the empty turn unanswered (caller muted or a function call running)"
            self._record("not_reasked", evidence, reason=reason)

    def _recovered(self, instruction: str) -> bool:
        context = getattr(self._aggregator, "context", None)
        messages = context.get_messages() if context is not None else []
        return bool(messages) and messages[-1].get("role") == "developer" and messages[-1].get("content") == instruction

    async def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            await self.cancel_task(self._timer)
        self._timer = None

    def _record(self, action: str, evidence: dict[str, Any], **extra: Any) -> None:
        if self._on_decision is not None:
            self._on_decision(action, {**evidence, **extra})
