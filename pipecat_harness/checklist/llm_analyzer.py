"""LLM analyzer: Gemini (google-genai) with structured JSON output.

Unknown question ids and locations in the answer are dropped; an answer that does not match
:class:`AnalysisSchema` raises :class:`~pipecat_harness.checklist.analysis.AnalyzerError`, state untouched.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from pipecat_harness.checklist.analysis import Analysis, Analyzer, AnalyzerError, ItemUpdate
from pipecat_harness.checklist.model import Checklist
from pipecat_harness.checklist.progress import ChecklistState

__all__ = ["AnalysisSchema", "GeminiAnalyzer", "UpdateSchema", "build_analysis_prompt"]

_INSTRUCTIONS = """You track a phone checklist. Given the checklist items with their status, the last
instruction the agent followed, and the caller's latest utterance, report what the utterance changed.
- outcome "denied": the caller says there is none ("no incidents"). A negation that applies to something
  else ("no issues with the incident") does NOT deny the item; it means one exists ("reported").
- outcome "reported": the caller reports one (or says yes to the question about it).
- outcome "detail": the caller answers the follow-up about something already reported.
- A merged answer can touch several items: report each one.
- location: one of the known locations if the caller tied the answer to it, else null.
- unexpected_topics: short phrases for things the caller raised that are not on the checklist.
Answer only with JSON matching the schema."""


class UpdateSchema(BaseModel):
    """One item update in the model's answer."""

    question_id: str
    outcome: Literal["reported", "denied", "detail"]
    location: str | None = None
    note: str = ""


class AnalysisSchema(BaseModel):
    """The JSON the model must return."""

    updates: list[UpdateSchema] = Field(default_factory=list)
    locations: list[str] = Field(default_factory=list)
    unexpected_topics: list[str] = Field(default_factory=list)


def build_analysis_prompt(checklist: Checklist, state: ChecklistState, utterance: str) -> str:
    """The user content sent to the model for one utterance."""
    items = [{"question_id": q.id, "question": q.ask, "status": {k: state.status(k).value for k in state.keys_for(q)}}
             for q in checklist.questions]
    payload = {"checklist": items, "known_locations": [loc.name for loc in checklist.locations],
               "locations_mentioned_so_far": state.locations,
               "last_instruction": (state.last_directive or {}).get("instruction"), "caller_utterance": utterance}
    return json.dumps(payload, ensure_ascii=False)


class GeminiAnalyzer(Analyzer):
    """Analyzer backed by a Gemini model through google-genai.

    Args:
        client: A ``google.genai.Client`` (or any object with its ``aio.models.generate_content`` coroutine).
        model: Model name.
    """

    name = "gemini"

    def __init__(self, client: Any, *, model: str = "gemini-2.5-flash") -> None:
        self.client = client
        self.model = model

    async def analyze(self, checklist: Checklist, state: ChecklistState, utterance: str) -> Analysis:
        """Ask the model for the analysis and validate it (``AnalyzerError`` on failure or a schema mismatch)."""
        prompt = build_analysis_prompt(checklist, state, utterance)
        try:
            from google.genai import types

            config = types.GenerateContentConfig(system_instruction=_INSTRUCTIONS, temperature=0,
                                                 response_mime_type="application/json", response_schema=AnalysisSchema)
            response = await self.client.aio.models.generate_content(model=self.model, contents=prompt, config=config)
        except Exception as exc:
            raise AnalyzerError(f"Gemini analyzer call failed: {exc}") from exc
        text = getattr(response, "text", None)
        if not text:
            raise AnalyzerError("Gemini analyzer returned no text")
        try:
            parsed = AnalysisSchema.model_validate_json(text)
        except ValidationError as exc:
            raise AnalyzerError(f"Gemini analyzer answer does not match the schema: {exc}") from exc
        known_locations = {loc.name for loc in checklist.locations}
        updates = [ItemUpdate(u.question_id, u.outcome, u.location if u.location in known_locations else None, u.note)
                   for u in parsed.updates if checklist.has_question(u.question_id)]
        topics = [topic.strip() for topic in parsed.unexpected_topics if topic.strip()]
        return Analysis(updates=updates, locations=[loc for loc in parsed.locations if loc in known_locations],
                        unexpected_topics=topics, analyzer=self.name)
