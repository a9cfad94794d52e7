import json
from types import SimpleNamespace

import pytest

from pipecat_harness.checklist.analysis import AnalyzerError
from pipecat_harness.checklist.driver import ChecklistDriver
from pipecat_harness.checklist.llm_analyzer import AnalysisSchema, GeminiAnalyzer
from pipecat_harness.checklist.model import bundled_checklist
from pipecat_harness.checklist.progress import ChecklistState, ItemStatus
from pipecat_harness.state.memory import MemoryStateStore

CHECKLIST = bundled_checklist()


class FakeModels:
    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.requests: list[dict] = []

    async def generate_content(self, *, model, contents, config):
        self.requests.append({"model": model, "contents": contents, "config": config})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return SimpleNamespace(text=answer)


def fake_client(*answers) -> SimpleNamespace:
    return SimpleNamespace(aio=SimpleNamespace(models=FakeModels(list(answers))))


async def test_structured_output_request_and_parsing():
    answer = {
        "updates": [
            {"question_id": "scheduling_conflicts", "outcome": "denied", "location": None},
            {"question_id": "compliance_updates", "outcome": "reported", "location": "warehouse", "note": "permit"},
            {"question_id": "made_up", "outcome": "denied"},
        ],
        "locations": ["warehouse", "Atlantis"],
        "unexpected_topics": [" client visit on Friday ", ""],
    }
    client = fake_client(json.dumps(answer))
    analyzer = GeminiAnalyzer(client, model="gemini-test")
    analysis = await analyzer.analyze(CHECKLIST, ChecklistState(call_id="c"), "No scheduling conflicts, but ...")
    request = client.aio.models.requests[0]
    assert request["model"] == "gemini-test"
    assert request["config"].response_mime_type == "application/json"
    assert request["config"].response_schema is AnalysisSchema
    assert request["config"].temperature == 0
    sent = json.loads(request["contents"])
    assert sent["caller_utterance"] == "No scheduling conflicts, but ..."
    assert [item["question_id"] for item in sent["checklist"]][:2] == ["incidents", "near_misses"]
    assert [(u.question_id, u.outcome, u.location) for u in analysis.updates] == [
        ("scheduling_conflicts", "denied", None),
        ("compliance_updates", "reported", "warehouse"),
    ]
    assert analysis.locations == ["warehouse"]
    assert analysis.unexpected_topics == ["client visit on Friday"]
    assert analysis.analyzer == "gemini"


@pytest.mark.parametrize(
    "answer",
    ["not json", json.dumps({"updates": [{"question_id": "incidents", "outcome": "maybe"}]}), "", RuntimeError("429")],
)
async def test_bad_answers_raise_analyzer_error(answer):
    analyzer = GeminiAnalyzer(fake_client(answer))
    with pytest.raises(AnalyzerError):
        await analyzer.analyze(CHECKLIST, ChecklistState(call_id="c"), "No incidents.")


async def test_driver_uses_the_llm_and_falls_back_to_rules_on_a_bad_answer():
    good = json.dumps({"updates": [{"question_id": "incidents", "outcome": "denied"}]})
    decisions: list[str] = []
    driver = ChecklistDriver(
        CHECKLIST,
        MemoryStateStore(),
        analyzer=GeminiAnalyzer(fake_client(good, "garbage")),
        on_decision=lambda action, evidence: decisions.append(action),
    )
    await driver.sync("c", ["We had none of those."])
    state = await driver.load("c")
    assert state.status("incidents") == ItemStatus.DENIED  # the rules alone could not have told
    await driver.sync("c", ["We had none of those.", "No near misses."])
    state = await driver.load("c")
    assert state.status("near_misses") == ItemStatus.DENIED
    assert decisions.count("analyzer_fallback") == 1
