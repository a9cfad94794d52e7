"""``LLMGrader`` (Gemini through google-genai) and ``CombinedGrader`` (rules first, the model for the rest).

The model gets the tenant's facts (policies read as statements), both utterances and :data:`GRADER_PROMPT`, and answers
in structured JSON at temperature 0. An invalid answer or a failed request yields one ``llm_flagged`` verdict saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from loguru import logger

from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import CATEGORIES, SETTLED_CONFIDENCE, Category, Verdict, VerdictKind
from pipecat_harness.numbers import read_numbers, tokenize

__all__ = ["GRADER_PROMPT", "VERDICT_JSON_SCHEMA", "CombinedGrader", "LLMGrader"]

GRADER_PROMPT = """You check what a phone agent said against the business's facts.
Split the agent utterance into claims. For each claim return one verdict:
- "supported": the facts back it. Filler, greetings, questions, referrals to a human and
  "I can't help with that" are supported.
- "unsupported": it states a number, time, day, price, policy, capability or completed action
  the facts do not back or contradict. Check every number, time and promise.
- "out_of_scope": it is about something the facts do not cover and promises nothing.
- "llm_flagged": you are not sure. When uncertain, say llm_flagged.
Category is one of price, hours, policy, capability, action. Policies are identifiers written in
words; read them as statements. An action claim ("I've updated your address") is only supported
if the facts list that operation as succeeded. Quote the claim; cite the fact id or key you used
as constraint_ref (null if none); give a one-sentence rationale and a confidence from 0 to 1.
Return {"verdicts": [...]}; an utterance with no claim returns {"verdicts": []}."""

_VERDICTS = ["supported", "unsupported", "out_of_scope", "llm_flagged"]
_VERDICT_FIELDS = {"verdict": {"type": "string", "enum": _VERDICTS}, "claim": {"type": "string"},
                   "category": {"type": "string", "enum": list(CATEGORIES)},
                   "constraint_ref": {"type": ["string", "null"]}, "rationale": {"type": "string"},
                   "confidence": {"type": "number"}}
_VERDICT_ITEM = {"type": "object", "properties": _VERDICT_FIELDS,
                 "required": [name for name in _VERDICT_FIELDS if name != "constraint_ref"]}
VERDICT_JSON_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"verdicts": {"type": "array", "items": _VERDICT_ITEM}}, "required": ["verdicts"]}


class LLMGrader:
    """Grade with a Gemini model (``client``: a ``google.genai.Client``, built from ``GOOGLE_API_KEY`` if omitted)."""

    def __init__(self, constraints: ConstraintList, *, client: Any = None, model: str = "gemini-2.5-flash") -> None:
        if client is None:
            from pipecat_harness.errors import gemini_client

            client = gemini_client("the LLM grader (grader mode llm or combined)", "use grader mode rules")
        self.constraints = constraints
        self.client = client
        self.model = model
        facts = constraints.model_dump(mode="json", exclude={"policies", "version"})
        self._facts = json.dumps({**facts, "policies": constraints.statements()}, sort_keys=True)

    async def grade(self, agent_utterance: str, caller_utterance: str | None = None, *, call_id: str | None = None,
                    succeeded_operations: Sequence[str] = ()) -> list[Verdict]:
        """Ask the model for one verdict per claim (``call_id`` is unused: the model cannot read the ledger)."""
        request = {"facts": json.loads(self._facts), "succeeded_operations": list(succeeded_operations)}
        contents = json.dumps({**request, "caller_utterance": caller_utterance, "agent_utterance": agent_utterance})
        try:
            from google.genai import types

            config = types.GenerateContentConfig(temperature=0, system_instruction=GRADER_PROMPT,
                                                 response_mime_type="application/json",
                                                 response_json_schema=VERDICT_JSON_SCHEMA)
            response = await self.client.aio.models.generate_content(model=self.model, contents=contents, config=config)
            text = getattr(response, "text", None) or ""
        except Exception as exc:  # a grader failure must never break the call; the row says why
            logger.warning(f"LLM grader request failed: {exc!r}")
            return [self._flag(agent_utterance, f"grader request failed: {type(exc).__name__}: {exc}")]
        return self.parse(text, agent_utterance)

    def parse(self, text: str, agent_utterance: str) -> list[Verdict]:
        """Turn the model's JSON answer into verdicts; invalid answers become one ``llm_flagged`` verdict."""
        try:
            data = json.loads(text)
            items = data["verdicts"] if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise TypeError("verdicts is not a list")
            return [self._verdict(item) for item in items]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            snippet = text[:80].replace("\n", " ")
            return [self._flag(agent_utterance, f"grader returned invalid JSON ({exc}): {snippet!r}")]

    @staticmethod
    def _verdict(item: Any) -> Verdict:
        if not isinstance(item, dict):
            raise TypeError(f"verdict is not an object: {item!r}")
        verdict, category = str(item["verdict"]), str(item["category"])
        if verdict not in _VERDICTS or category not in CATEGORIES:
            raise ValueError(f"unknown verdict or category: {verdict!r}, {category!r}")
        confidence = min(1.0, max(0.0, float(item.get("confidence", 0.5))))
        ref, claim, rationale = item.get("constraint_ref"), str(item.get("claim", "")), str(item.get("rationale", ""))
        kind, said_category = cast(VerdictKind, verdict), cast(Category, category)
        return Verdict(kind, claim, said_category, str(ref) if ref else None, rationale, confidence)

    @staticmethod
    def _flag(agent_utterance: str, rationale: str) -> Verdict:
        return Verdict("llm_flagged", agent_utterance, "none", None, rationale, 0.0)


class CombinedGrader:
    """Rules first; the model for every claim the rules cannot settle (``out_of_scope``, below ``min_confidence``).

    The model is also asked when the rules found no claim in an utterance that says a number, an offer or a promise.
    Its verdicts replace the unsettled ones (if it returns none, the rules' stand); action claims stay with the rules.
    """

    def __init__(self, rules: RuleGrader, llm: LLMGrader, *, min_confidence: float = SETTLED_CONFIDENCE) -> None:
        self.rules = rules
        self.llm = llm
        self.min_confidence = min_confidence
        self.model = f"rules+{llm.model}"

    def unsettled(self, verdicts: Sequence[Verdict]) -> list[Verdict]:
        """The rule verdicts the model should decide."""
        unsettled = (v for v in verdicts if v.verdict == "out_of_scope" or v.confidence < self.min_confidence)
        return [v for v in unsettled if v.category != "action"]

    async def grade(self, agent_utterance: str, caller_utterance: str | None = None, *,
                    call_id: str | None = None) -> list[Verdict]:
        """Grade with rules, then hand unsettled claims to the model."""
        verdicts = await self.rules.grade(agent_utterance, caller_utterance, call_id=call_id)
        unsettled = self.unsettled(verdicts)
        if not unsettled and (verdicts or not _needs_a_look(agent_utterance)):
            return verdicts
        settled = [v for v in verdicts if v not in unsettled]
        model_verdicts = [v for v in await self.llm.grade(agent_utterance, caller_utterance) if v.category != "action"]
        return settled + (model_verdicts or unsettled)


_PROMISE_RE = re.compile(
    r"\b(?:i|we)(?:'ll| will| can| could)\b|\blet me\b|\bguarantee|\bpromise|\bavailable\b|\bopening|\bfree\b")


def _needs_a_look(text: str) -> bool:
    """Whether an utterance the rules found no claim in says a number, an offer or a promise."""
    return any(ch.isdigit() for ch in text) or bool(_PROMISE_RE.search(text.lower())) or any(
        t.number is not None and t.word not in {"one", "a"} for t in read_numbers(tokenize(text)))
