"""``ChecklistControl``: the checklist driver as a harness control."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipecat.processors.frame_processor import FrameProcessor

from pipecat_harness.checklist.analysis import Analyzer
from pipecat_harness.checklist.director import ChecklistDirector
from pipecat_harness.checklist.driver import ChecklistDriver, DecisionSink
from pipecat_harness.checklist.model import Checklist, bundled_checklist, load_checklist
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer
from pipecat_harness.config import ChecklistSettings
from pipecat_harness.control import HarnessControl, Placement
from pipecat_harness.state.coordination import CallLock
from pipecat_harness.state.factory import create_store

if TYPE_CHECKING:
    from pipecat_harness.control import ControlHost

__all__ = ["ChecklistControl", "build_analyzer", "build_driver", "load_configured_checklist"]


def load_configured_checklist(settings: ChecklistSettings) -> Checklist:
    """The checklist the settings name (a file path wins over a bundled name)."""
    return load_checklist(settings.checklist_path) if settings.checklist_path else bundled_checklist(settings.checklist)


def build_analyzer(settings: ChecklistSettings, *, gemini_client: Any = None) -> Analyzer:
    """The analyzer the settings name; Gemini reads ``GOOGLE_API_KEY``/``GEMINI_API_KEY`` unless given a client."""
    if settings.analyzer == "gemini":
        from pipecat_harness.checklist.llm_analyzer import GeminiAnalyzer

        if gemini_client is None:
            from pipecat_harness.errors import gemini_client as make_gemini_client

            gemini_client = make_gemini_client("the Gemini checklist analyzer (checklist.analyzer: gemini)",
                                               "set checklist.analyzer: rules")
        return GeminiAnalyzer(gemini_client, model=settings.gemini_model)
    return RuleAnalyzer()


def build_driver(settings: ChecklistSettings, *, on_decision: DecisionSink,
                 decisions_wanted: Callable[[], bool] | None = None) -> ChecklistDriver:
    """The driver of the configured checklist, with its store, analyzer and lock."""
    checklist = load_configured_checklist(settings)
    store = create_store(settings.store, redis_url=settings.redis_url, prefix=settings.key_prefix,
                         memory_max_keys=settings.memory_max_keys)
    lock = CallLock(store, ttl_secs=settings.lock_ttl_secs, work_timeout_secs=settings.work_timeout_secs)
    return ChecklistDriver(checklist, store, analyzer=build_analyzer(settings), debounce_secs=settings.debounce_secs,
                           lock=lock, on_decision=on_decision, decisions_wanted=decisions_wanted,
                           state_ttl_secs=settings.state_ttl_secs)


class ChecklistControl(HarnessControl):
    """Walks a checklist: a :class:`ChecklistDirector` before the LLM directs every model run."""

    name = "checklist"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        self.settings = harness.config.checklist
        self.driver = build_driver(self.settings, on_decision=self.record)
        self.checklist = self.driver.checklist
        self.director = ChecklistDirector(self.driver, call_id=harness.call_id, marker=self.settings.directive_marker)

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The director, between the user aggregator and the LLM."""
        return [(Placement.BEFORE_LLM, self.director)]
