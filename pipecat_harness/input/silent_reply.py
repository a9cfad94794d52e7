"""``SilentReplyGuard``: re-ask when a confirmation got speech but no transcript.

How Pipecat 1.14 treats such a reply: VAD opens a user turn, the STT returns
nothing (Deepgram drops empty finals), the stop strategies wait for a
transcript that never comes, and the ``user_turn_stop_timeout`` watchdog (5 s)
ends the turn empty. ``EmptyUserTurnConfig`` then answers only if the turn
*interrupted* the bot; an empty turn while the bot was idle (the caller's
"mm-hmm" after "Shall I go ahead?") gets no answer by default, so the call
stalls and the confirmation never reaches the model.

The guard sits between STT and the user aggregator, where it sees the caller's
VAD frames (downstream from a transport/VAD processor, or upstream when the
aggregator runs VAD and broadcasts them), the transcripts, and the assistant
turns the assistant aggregator broadcasts upstream. When a confirmation is
pending — set with :meth:`SilentReplyGuard.expect_confirmation` or inferred from
an assistant turn ending in a yes/no question — and speech ends with no
transcript for ``window_secs`` (well inside the watchdog), it speaks the re-ask
prompt with a ``TTSSpeakFrame``, which the assistant aggregator then adds to the
context. At most ``max_reasks`` times in a row; a transcript resets the count.
A silent reply that interrupted the bot is left to Pipecat's own empty-turn
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
    TTSSpeakFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

__all__ = ["DEFAULT_REASK_PROMPT", "SilentReplyGuard", "is_yes_no_question"]

DEFAULT_REASK_PROMPT = "Sorry, I didn't catch that. Could you say yes or no?"

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


class SilentReplyGuard(FrameProcessor):
    """Re-asks a pending confirmation when the caller spoke but no transcript arrived.

    Args:
        window_secs: How long after the caller stops speaking a transcript may take.
        max_reasks: Re-asks in a row before giving up (until a transcript arrives).
        prompt: What the bot says to re-ask.
        infer_from_assistant: Treat an assistant turn ending in a yes/no question as a pending confirmation.
        on_decision: Called with ``(action, evidence)`` for each re-ask or refusal.
        **kwargs: Passed to ``FrameProcessor``.
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
        kwargs.setdefault("enable_direct_mode", True)
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
        self._app_pending: bool | None = None
        self._inferred_pending = False
        self._last_assistant = ""
        self._reasks = 0
        self._bot_speaking = False
        self._speech_open = False
        self._speech_interrupted_bot = False
        self._transcript_seen = False
        self._timer: asyncio.Task[None] | None = None

    @property
    def pending_confirmation(self) -> bool:
        """Whether a yes/no answer is awaited (the application's setting wins over inference)."""
        return self._app_pending if self._app_pending is not None else self._inferred_pending

    def expect_confirmation(self, pending: bool | None = True) -> None:
        """Set by the application: a confirmation is (or is no longer) pending; ``None`` restores inference."""
        self._app_pending = pending

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Watch caller speech, transcripts and assistant turns; forward every frame."""
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStartedSpeakingFrame):
            await self._cancel_timer()
            self._speech_open = True
            self._speech_interrupted_bot = self._bot_speaking
            self._transcript_seen = False
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._speech_open = False
            if self.pending_confirmation and not self._transcript_seen and self._timer is None:
                self._timer = self.create_task(self._window(), "silent_reply_window")
        elif (
            isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame))
            and direction == FrameDirection.DOWNSTREAM
        ):
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
        await self.push_frame(frame, direction)

    async def _window(self) -> None:
        try:
            await asyncio.sleep(self.window_secs)
        except asyncio.CancelledError:
            return
        self._timer = None
        if self._transcript_seen or self._speech_open or not self.pending_confirmation:
            return
        evidence: dict[str, Any] = {
            "window_ms": round(self.window_secs * 1000),
            "added_wait_ms": round(self.window_secs * 1000),
            "pending": "application" if self._app_pending else "inferred",
            "last_assistant": self._last_assistant[-200:],
            "reasks": self._reasks,
        }
        if self._speech_interrupted_bot:
            self._record(
                "deferred",
                {**evidence, "reason": "the reply interrupted the bot: Pipecat's empty-turn recovery answers it"},
            )
            return
        if self._reasks >= self.max_reasks:
            self._record("not_reasked", {**evidence, "reason": f"already re-asked {self._reasks} time(s)"})
            return
        self._reasks += 1
        self._record("reasked", {**evidence, "prompt": self.prompt, "reasks": self._reasks})
        await self.push_frame(TTSSpeakFrame(text=self.prompt))

    async def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            await self.cancel_task(self._timer)
        self._timer = None

    async def cleanup(self) -> None:
        """Stop the window timer."""
        await super().cleanup()
        await self._cancel_timer()

    def _record(self, action: str, evidence: dict[str, Any]) -> None:
        if self._on_decision is not None:
            self._on_decision(action, evidence)
