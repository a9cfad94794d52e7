"""What a scenario expects at the end of the call: business state, history and context checks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pipecat_harness.sim.strict_model import StrictModel

__all__ = ["ContextCheck", "Expectations", "HistoryCheck", "StateCheck"]


class StateCheck(StrictModel):
    """An expectation on the final business state: a SQL query and the value it must return.

    Parameters:
        sql: A query returning one value (the first column of the first row).
        equals: The value it must return (numbers compare within 1e-6).
        why: What the check means, shown with its result.
    """

    sql: str = Field(min_length=1)
    equals: Any
    why: str = ""


class HistoryCheck(StrictModel):
    """Expectations on what the model was left believing after interruptions.

    Parameters:
        max_unplayed_words: Most words of unplayed text allowed in retained history per turn.
        max_removed_words: Most words of played text allowed missing from history per turn.
        max_repeated_replies: Most model replies allowed to repeat an earlier reply.
    """

    max_unplayed_words: int | None = Field(default=None, ge=0)
    max_removed_words: int | None = Field(default=None, ge=0)
    max_repeated_replies: int | None = Field(default=None, ge=0)


class ContextCheck(StrictModel):
    """What the model's context must hold at the end of the call.

    Parameters:
        contains: Regular expressions that must each match some message.
        max_tokens: Upper bound of the final context's size (Pipecat's token estimate).
        summarized: The context must have been summarised at least once.
    """

    contains: list[str] = Field(default_factory=list)
    max_tokens: int | None = Field(default=None, gt=0)
    summarized: bool = False


class Expectations(StrictModel):
    """What must hold at the end of the call.

    Parameters:
        state: SQL checks on the final business database.
        history: Limits on what history kept after interruptions.
        caller_completed: The caller must get through the whole script (no hang-up while waiting).
        context: Expectations on the model's final context (what it holds, its size, whether it was summarised).
    """

    state: list[StateCheck] = Field(default_factory=list)
    history: HistoryCheck = Field(default_factory=HistoryCheck)
    context: ContextCheck | None = None
    caller_completed: bool = True
