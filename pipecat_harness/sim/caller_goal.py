"""A caller described by goal: who they are, why they call, what they know and when they cut in."""

from __future__ import annotations

import re

from pydantic import Field

from pipecat_harness.sim.strict_model import StrictModel

__all__ = ["PAUSE_MARK", "CallerGoal", "Interruptions", "KnownFact", "spoken_segments"]

#: How a pause inside an utterance is written.
PAUSE_MARK = re.compile(r"\s*(?:\.\.\.|…)\s*")


class KnownFact(StrictModel):
    """Something the caller knows and gives when asked.

    Parameters:
        what: What it is, as the bot would ask for it (``order number``, ``zip code``).
        say: How the caller says it; ``...`` marks a pause.
        asked_as: Regex of the bot's question that asks for it (default: the words of ``what``).
    """

    what: str = Field(min_length=1)
    say: str = Field(min_length=1)
    asked_as: str | None = None


class Interruptions(StrictModel):
    """When the caller barges in.

    Parameters:
        after_secs: Cut in once a bot reply has lasted this long (``None``: never).
    """

    after_secs: float | None = Field(default=None, gt=0, le=60)


class CallerGoal(StrictModel):
    """A caller played from a goal by an LLM caller.

    Parameters:
        persona: Who the caller is and how they talk.
        reason: Why they call, in their words (their opening line when they speak first).
        knows: What they can tell the bot.
        does_not_know: What they cannot tell it (they say so when asked).
        interrupts: When they barge in.
        done_when: Regex of the bot's reply after which the caller's goal is met and they say goodbye.
        reply_delay_secs: Seconds of bot silence before the caller answers.
        pause_secs: Length of each ``...`` pause.
        max_turns: The caller hangs up after this many turns.
        wait_secs: Longest wait for the bot before the caller gives up.
    """

    persona: str = "A customer calling about an order."
    reason: str = Field(min_length=1)
    knows: list[KnownFact] = Field(default_factory=list)
    does_not_know: list[str] = Field(default_factory=list)
    interrupts: Interruptions = Field(default_factory=Interruptions)
    done_when: str = r"anything else|goodbye|have a (?:good|great|nice) day"
    reply_delay_secs: float = Field(default=0.8, ge=0, le=30)
    pause_secs: float = Field(default=1.2, gt=0, le=30)
    max_turns: int = Field(default=8, ge=1, le=50)
    wait_secs: float = Field(default=12.0, gt=0, le=600)

    def instructions(self) -> str:
        """The caller model's system prompt: the goal, and how to write pauses and hang up."""
        return "\n".join([
            "You are playing a caller on a phone line to a customer-service voice agent.",
            f"Who you are: {self.persona}", f"Why you are calling: {self.reason}",
            *(f"If asked for your {fact.what}, say exactly: {fact.say}" for fact in self.knows),
            *(f"You do not know {unknown}; if asked, say you don't know it." for unknown in self.does_not_know),
            "Speak only your next line, as it would be said aloud: no stage directions, no quotes.",
            "Write '...' where you pause. Keep each line short, like a real caller.",
            "When your request is done or you give up, say goodbye and end your line with [hang up]."])


def spoken_segments(utterance: str, pause_secs: float) -> list[dict[str, float | str]]:
    """An utterance as speech segments: the text between ``...`` marks, with pauses between them."""
    segments: list[dict[str, float | str]] = []
    for piece in filter(None, (p.strip() for p in PAUSE_MARK.split(utterance))):
        if segments:
            segments.append({"pause": pause_secs})
        segments.append({"say": piece})
    return segments or [{"silent": 0.4}]
