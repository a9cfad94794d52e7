import json
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.llm_grader import CombinedGrader, LLMGrader
from pipecat_harness.grader.rules import RuleGrader


@dataclass
class _Response:
    text: str


@dataclass
class FakeModels:
    """Stands in for ``client.aio.models``: records requests, returns canned answers."""

    answers: list[Any]
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def generate_content(self, *, model: str, contents: str, config: Any) -> _Response:
        self.requests.append({"model": model, "contents": json.loads(contents), "config": config})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return _Response(answer)


class FakeClient:
    def __init__(self, *answers: Any) -> None:
        self.models = FakeModels(list(answers))
        self.aio = self


def verdicts_json(*items: dict[str, Any]) -> str:
    return json.dumps({"verdicts": list(items)})


PRICE_FLAG = {"verdict": "unsupported", "claim": "basic detail is $129", "category": "price",
              "constraint_ref": "px_basic", "rationale": "listed at $149", "confidence": 0.9}


async def test_structured_request_at_temperature_zero(constraints: ConstraintList) -> None:
    client = FakeClient(verdicts_json(PRICE_FLAG))
    grader = LLMGrader(constraints, client=client, model="gemini-test")
    verdicts = await grader.grade("The basic detail is $129.", "How much is a basic detail?")
    assert [(v.verdict, v.category, v.constraint_ref) for v in verdicts] == [("unsupported", "price", "px_basic")]
    request = client.models.requests[0]
    config = request["config"]
    assert config.temperature == 0
    assert config.response_mime_type == "application/json"
    assert config.response_json_schema["required"] == ["verdicts"]
    assert "When uncertain, say llm_flagged" in config.system_instruction
    assert request["contents"]["facts"]["policies"]["refund"] == "no cash refunds, store credit only"
    assert request["contents"]["caller_utterance"] == "How much is a basic detail?"
    assert request["model"] == "gemini-test"


async def test_invalid_json_and_failures_become_one_flagged_verdict(constraints: ConstraintList) -> None:
    client = FakeClient("not json {", verdicts_json({"verdict": "maybe", "category": "price"}),
                        TimeoutError("deadline"))
    grader = LLMGrader(constraints, client=client)
    for expected in ("invalid JSON", "invalid JSON", "grader request failed: TimeoutError"):
        [verdict] = await grader.grade("The basic detail is $129.")
        assert verdict.verdict == "llm_flagged" and verdict.confidence == 0.0
        assert expected in verdict.rationale


async def test_combined_asks_the_model_only_for_what_rules_cannot_decide(constraints: ConstraintList) -> None:
    client = FakeClient(verdicts_json({"verdict": "unsupported", "claim": "valet parking", "category": "capability",
                                       "constraint_ref": None, "rationale": "not offered", "confidence": 0.7}))
    combined = CombinedGrader(RuleGrader(constraints), LLMGrader(constraints, client=client, model="g"))
    decided = await combined.grade("The basic detail is $129.")
    assert [v.verdict for v in decided] == ["unsupported"] and client.models.requests == []
    filler = await combined.grade("Thanks for calling, how can I help?")
    assert filler == [] and client.models.requests == []
    undecided = await combined.grade("Valet parking takes 2 minutes.")
    assert [v.rationale for v in undecided] == ["not offered"]
    assert len(client.models.requests) == 1 and combined.model == "rules+g"


async def test_combined_hands_capability_and_policy_conditions_to_the_model(constraints: ConstraintList) -> None:
    answer = {"verdict": "unsupported", "claim": "transfer to Dave", "category": "capability",
              "constraint_ref": "capabilities", "rationale": "no transfers", "confidence": 0.9}
    client = FakeClient(verdicts_json(answer), verdicts_json(), verdicts_json())
    combined = CombinedGrader(RuleGrader(constraints), LLMGrader(constraints, client=client, model="g"))
    transfer = await combined.grade("I can transfer you to our manager, Dave, right now.")
    assert [v.rationale for v in transfer] == ["no transfers"]
    # A model that finds nothing leaves the rules' verdict standing.
    same_day = await combined.grade("You can reschedule for free even on the same day.")
    assert [(v.verdict, v.category) for v in same_day] == [("unsupported", "policy")]
    opening = await combined.grade("We have an opening at three tomorrow.")
    assert [v.verdict for v in opening] == ["out_of_scope"]
    assert len(client.models.requests) == 3
    price = await combined.grade("The basic detail is $149.")
    assert [v.verdict for v in price] == ["supported"] and len(client.models.requests) == 3
