"""The checklist definition: sections of questions with follow-ups, loaded from YAML (``data/site_check_in.yaml``)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipecat_harness.bundled import BUNDLED_PREFIX, resolve_data_path
from pipecat_harness.errors import InputError
from pipecat_harness.validation import describe_validation_error, load_mapping_file

__all__ = ["Checklist", "ChecklistError", "ClosingStep", "Location", "Question", "Section", "bundled_checklist",
           "load_checklist"]


class ChecklistError(InputError):
    """A checklist file that cannot be used; the message names the file and the problem."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Question(_Model):
    """One item to cover on the call.

    Parameters:
        id: Stable identifier (used in state keys and analyzer output).
        ask: How the question is put to the caller.
        topic: Short noun phrase for the topic ("incidents").
        keywords: Words or phrases that show the caller is talking about it.
        follow_up: What to ask once the caller reported one.
        any_other: What to ask after a report has been followed up.
        per_location: Ask separately per location when several were mentioned.
        pair_with: Id of a question that is naturally asked together with this one.
    """

    id: str = Field(min_length=1, pattern=r"^[a-z0-9_]+$")
    ask: str = Field(min_length=1)
    topic: str = ""
    keywords: list[str] = Field(default_factory=list)
    follow_up: str | None = None
    any_other: str | None = None
    per_location: bool = False
    pair_with: str | None = None

    @property
    def topic_name(self) -> str:
        """The topic phrase, defaulting to the id in words."""
        return self.topic or self.id.replace("_", " ")


class Section(_Model):
    """A titled group of questions, asked in order."""

    id: str = Field(min_length=1)
    title: str = ""
    questions: list[Question] = Field(min_length=1)


class Location(_Model):
    """A place the caller may report on separately."""

    name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)


class ClosingStep(_Model):
    """One step of the closing flow (summary, feedback, sign-off).

    Parameters:
        id: Step name (``summary`` gets the list of reported items).
        instruction: What the model should do.
        wording: Suggested phrasing.
        end_call: Whether the call ends after this step is spoken.
    """

    id: str = Field(min_length=1)
    instruction: str = Field(min_length=1)
    wording: str = ""
    end_call: bool = False


_DEFAULT_CLOSING = [
    ClosingStep(id="summary", instruction="Briefly summarise what the caller reported and ask if it is correct."),
    ClosingStep(id="feedback", instruction="Ask whether the caller has any feedback about this call."),
    ClosingStep(id="sign_off", instruction="Thank the caller and say goodbye.", end_call=True),
]


class Checklist(_Model):
    """A whole checklist: sections, known locations, closing flow and the base prompt."""

    name: str = Field(min_length=1)
    title: str = ""
    base_prompt: str = "You are a friendly, concise phone agent working through a checklist with the caller."
    locations: list[Location] = Field(default_factory=list)
    sections: list[Section] = Field(min_length=1)
    closing: list[ClosingStep] = Field(default_factory=lambda: list(_DEFAULT_CLOSING))

    @model_validator(mode="after")
    def _check_references(self) -> Checklist:
        ids = [q.id for s in self.sections for q in s.questions]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate question ids: {duplicates}")
        for question in self.questions:
            if question.pair_with is not None and question.pair_with not in ids:
                raise ValueError(f"question {question.id!r}: pair_with {question.pair_with!r} is not a question id")
            if question.pair_with == question.id:
                raise ValueError(f"question {question.id!r} cannot pair with itself")
        return self

    @cached_property
    def questions(self) -> list[Question]:
        """All questions in asking order."""
        return [q for s in self.sections for q in s.questions]

    @cached_property
    def _by_id(self) -> dict[str, Question]:
        return {q.id: q for q in self.questions}

    def question(self, question_id: str) -> Question:
        """Return the question with ``question_id`` (``KeyError`` if there is none)."""
        try:
            return self._by_id[question_id]
        except KeyError:
            raise KeyError(f"checklist {self.name!r} has no question {question_id!r}") from None

    def has_question(self, question_id: str) -> bool:
        """Whether ``question_id`` names a question."""
        return question_id in self._by_id


def load_checklist(path: str | Path) -> Checklist:
    """Load and validate a checklist YAML file or a bundled one (``bundled:site_check_in``).

    ``ChecklistError`` when it is unreadable, not YAML, or not a valid checklist.
    """
    try:
        path = resolve_data_path(path, "checklist")
    except InputError as exc:
        raise ChecklistError(str(exc)) from exc
    try:
        return Checklist.model_validate(load_mapping_file(path, what="checklist", error=ChecklistError))
    except ValidationError as exc:
        raise ChecklistError(f"{path}: invalid checklist: {describe_validation_error(exc, model=Checklist)}") from exc


def bundled_checklist(name: str = "site_check_in") -> Checklist:
    """Load a checklist shipped in ``pipecat_harness/checklist/data/`` (``ChecklistError`` if there is none)."""
    return load_checklist(BUNDLED_PREFIX + name.removeprefix(BUNDLED_PREFIX))
