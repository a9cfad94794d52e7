"""The caller side of a scenario: the turns the caller speaks, with timing, and how speech becomes frames."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pipecat_harness.sim.strict_model import StrictModel

__all__ = ["CallerSpec", "CallerTurn", "SpeechSegment"]


class SpeechSegment(StrictModel):
    """One piece of a caller turn: speech with a transcript, a pause, or speech with no transcript.

    Exactly one of ``say``, ``pause`` and ``silent`` is given.

    Parameters:
        say: What the caller says (the final transcript the ASR produces).
        secs: Duration of the speech; defaults to the caller's speaking rate.
        asr: What the ASR returns instead of ``say`` (to model recognition artifacts).
        pause: Silence in seconds inside the same turn.
        silent: Seconds of speech that VAD detects but that yields no transcript.
    """

    say: str | None = None
    secs: float | None = Field(default=None, gt=0, le=120)
    asr: str | None = None
    pause: float | None = Field(default=None, ge=0, le=120)
    silent: float | None = Field(default=None, gt=0, le=120)

    @model_validator(mode="after")
    def _one_kind(self) -> SpeechSegment:
        kinds = [k for k in ("say", "pause", "silent") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of 'say', 'pause' or 'silent'")
        if (self.secs is not None or self.asr is not None) and self.say is None:
            raise ValueError("'secs' and 'asr' only go with 'say'")
        return self


class CallerTurn(StrictModel):
    """A caller turn and when it starts.

    Parameters:
        after: ``bot`` waits until the bot has spoken since the previous caller turn and then stayed quiet for ``delay``
            seconds; ``bot_started`` starts ``delay`` seconds after the bot starts speaking (a barge-in); ``start``
            starts ``delay`` seconds after the call starts.
        delay: Seconds after the trigger.
        wait: Longest wait in seconds for the trigger; then the caller gives up and hangs up (the rest is not spoken).
        speech: The segments of the turn.
    """

    after: Literal["bot", "bot_started", "start"] = "bot"
    delay: float = Field(default=1.0, ge=0, le=600)
    wait: float = Field(default=10.0, gt=0, le=600)
    speech: list[SpeechSegment] = Field(min_length=1)


class CallerSpec(StrictModel):
    """How the simulated caller's speech turns into frames.

    Parameters:
        words_per_minute: The caller's speaking rate (sets each utterance's length unless ``secs`` is given).
        asr_final_secs: Delay from the end of speech to the final transcript.
        interim_every_words: An interim transcript every this many words.
    """

    words_per_minute: float = Field(default=150.0, gt=30, le=400)
    asr_final_secs: float = Field(default=0.3, ge=0, le=5)
    interim_every_words: int = Field(default=2, ge=1, le=50)
    #: How the recogniser writes what was said (see :mod:`pipecat_harness.sim.asr_format`).
    asr_format: Literal["plain", "deepgram", "whisper"] = "plain"
    #: Finals per stretch of speech: all but the last arrive while the caller is still speaking.
    final_pieces: int = Field(default=1, ge=1, le=10)
    #: When set, the last piece answers the STT's ``Finalize`` this long *after* the VAD stop (Deepgram: 0.1-0.4 s);
    #: otherwise it arrives ``asr_final_secs`` after the speech ends.
    finalize_delay_secs: float | None = Field(default=None, ge=0, le=3)
    #: The STT's P99 time to final, announced in an ``STTMetadataFrame`` at the start of the call.
    stt_p99_secs: float | None = Field(default=None, gt=0, le=5)
