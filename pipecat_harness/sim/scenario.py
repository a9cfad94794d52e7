"""Scenario files: caller script, scripted model, business database, expected outcome."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from pipecat_harness.config import CONTROL_NAMES
from pipecat_harness.errors import InputError
from pipecat_harness.sim.caller_goal import CallerGoal
from pipecat_harness.sim.caller_script import CallerSpec, CallerTurn, SpeechSegment
from pipecat_harness.sim.expectations import ContextCheck, Expectations, HistoryCheck, StateCheck
from pipecat_harness.sim.model_script import (
    TEMPLATE_FILTERS,
    TEMPLATE_PATTERN,
    DecisionCondition,
    ModelAction,
    ModelDecision,
    ModelScript,
    ToolCallSpec,
)
from pipecat_harness.sim.scenario_business import RETAIL_TOOL_NAMES, DatabaseSpec, TableSpec, ToolSpec
from pipecat_harness.sim.strict_model import StrictModel
from pipecat_harness.validation import describe_validation_error, load_mapping_file

__all__ = ["TEMPLATE_FILTERS", "TEMPLATE_PATTERN", "CallerGoal", "CallerSpec", "CallerTurn", "ContextCheck",
           "DecisionCondition", "Expectations", "HistoryCheck", "ModelAction", "ModelDecision", "ModelScript",
           "Scenario", "ScenarioError", "SpeechSegment", "StateCheck", "TTSSpec", "TableSpec", "ToolCallSpec",
           "ToolFault", "ToolSpec", "bundled_scenario_names", "bundled_scenario_paths", "check_unique_names",
           "load_scenario", "load_scenarios", "scenario_files"]  # fmt: skip

BUNDLED_DIR = Path(__file__).resolve().parent.parent / "scenarios"


class ScenarioError(InputError):
    """A scenario file that cannot be used; the message names the file, the field and the problem."""


class ToolFault(StrictModel):
    """A backend fault injected under the tool layer (what the business system does).

    Parameters:
        tool: Tool name.
        occurrence: Which execution of that tool is affected (1 = first).
        kind: ``raise`` (the backend errors before writing), ``hang`` (never returns), ``slow`` (returns after
            ``secs``), ``lost_reply`` (the write happens, then the reply is lost and the call raises).
        secs: Delay for ``slow`` and ``lost_reply``.
        message: Error message for ``raise``/``lost_reply``.
    """

    tool: str
    occurrence: int = Field(default=1, ge=1)
    kind: Literal["raise", "hang", "slow", "lost_reply"] = "raise"
    secs: float = Field(default=0.0, ge=0, le=600)
    message: str = "backend unavailable"


class TTSSpec(StrictModel):
    """The simulated voice: speaking rate, latency and whether it gives word timestamps.

    Parameters:
        word_timestamps: Report word timestamps (like ElevenLabs or Cartesia), so history knows each word's time.
        words_per_minute: Speaking rate of the synthesised audio.
        first_audio_secs: Latency from the text to the first audio.
    """

    word_timestamps: bool = False
    words_per_minute: float = Field(default=165.0, gt=30, le=400)
    first_audio_secs: float = Field(default=0.2, ge=0, le=10)


ToolSet = Literal["retail", "callbacks", "policies"]


class Scenario(StrictModel):
    """A complete simulated call.

    Parameters:
        name: Unique name (used for trace file names).
        description: What the call exercises.
        domain: ``retail``, ``airline`` or ``telecom`` (selects the config preset).
        control: The control that addresses the failure the call shows (``None``: the call must pass either way).
        expect_without_control: Outcome expected with that control off.
        tags: Free labels (``stay_out_of_the_way`` marks calls where no control should act).
        database: The business database the tools act on and the expectations query.
        own_tools: The scenario's own tools: SQL or Python, with their argument schemas.
        tts: The simulated voice.
        caller_voice: How the caller's speech becomes VAD and transcript frames.
        model: The scripted model.
        faults: Backend faults injected under the tool layer.
        caller: The caller's turns, in order (a scripted caller).
        caller_goal: The caller described by goal instead, played by an LLM caller.
        expect: What must hold at the end of the call.
        max_call_secs: Longest the call may last in simulated time.
        tools: Demo tool sets the model can call: ``retail``, ``callbacks``, ``policies`` (the ``lookup_policy`` tool).
        harness: Settings of this call's harness over the domain preset (switches are left to the command line).
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    domain: Literal["retail", "airline", "telecom"] = "retail"
    control: str | None = None
    expect_without_control: Literal["pass", "fail"] = "pass"
    tags: list[str] = Field(default_factory=list)
    database: DatabaseSpec = Field(default_factory=DatabaseSpec)
    own_tools: list[ToolSpec] = Field(default_factory=list)
    tts: TTSSpec = Field(default_factory=TTSSpec)
    caller_voice: CallerSpec = Field(default_factory=CallerSpec)
    model: ModelScript
    faults: list[ToolFault] = Field(default_factory=list)
    caller: list[CallerTurn] = Field(default_factory=list)
    caller_goal: CallerGoal | None = None
    expect: Expectations = Field(default_factory=Expectations)
    tools: list[ToolSet] = Field(default_factory=lambda: list[ToolSet](["retail"]))
    harness: dict[str, Any] = Field(default_factory=dict)
    max_call_secs: float = Field(default=300.0, gt=0, le=3600)
    source: str = Field(default="", exclude=True)

    def tool_names(self) -> list[str]:
        """The tools the scripted model can call in this scenario."""
        retail = list(RETAIL_TOOL_NAMES) if self.database.seed == "retail" and "retail" in self.tools else []
        return retail + [tool.name for tool in self.own_tools if tool.name not in retail]

    @model_validator(mode="after")
    def _one_caller(self) -> Scenario:
        if bool(self.caller) == (self.caller_goal is not None):
            raise ValueError(
                "give the caller either as a script ('caller': its turns) or by goal ('caller_goal'), "
                "exactly one of them"
            )
        return self

    @model_validator(mode="after")
    def _known_tools(self) -> Scenario:
        names = self.tool_names()
        if set(self.tools) - {"retail"}:
            return self  # the other demo tool sets name their tools in their own modules
        declared = [tool.name for tool in self.own_tools]
        retail = set(RETAIL_TOOL_NAMES) if self.database.seed == "retail" else set()
        clash = sorted({n for n in declared if declared.count(n) > 1} | (set(declared) & retail))
        if clash:
            raise ValueError(f"tools: {', '.join(clash)} declared twice (or also a retail tool); rename it")
        used: list[tuple[str, str]] = []
        for i, decision in enumerate(self.model.decisions):
            where = f"model.decisions[{i}]"
            actions: list[tuple[str, ModelDecision | ModelAction]] = [("", decision)]
            actions += [(f".alternatives[{k}]", action) for k, action in enumerate(decision.alternatives)]
            for alternative, action in actions:
                calls = enumerate(action.tool_calls)
                used += [(f"{where}{alternative}.tool_calls[{j}].name", call.name) for j, call in calls]
            if decision.when.tool is not None:
                used.append((f"{where}.when.tool", decision.when.tool))
        used += [(f"faults[{i}].tool", fault.tool) for i, fault in enumerate(self.faults)]
        for where, name in used:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                if close:
                    hint = f"did you mean '{close[0]}'?"
                else:
                    hint = f"tools here: {', '.join(names)}" if names else "declare it under 'tools:'"
                raise ValueError(f"{where}: unknown tool '{name}' ({hint})")
        return self

    @field_validator("control")
    @classmethod
    def _known_control(cls, value: str | None) -> str | None:
        if value is not None and value not in CONTROL_NAMES:
            close = difflib.get_close_matches(value, CONTROL_NAMES, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"controls are {', '.join(CONTROL_NAMES)}"
            raise ValueError(f"unknown control '{value}' ({hint})")
        return value

    def expected_outcome(self, active_controls: set[str] | frozenset[str]) -> Literal["pass", "fail"]:
        """Return the outcome this scenario should have with the given controls active."""
        if self.control is None or self.control in active_controls:
            return "pass"
        return self.expect_without_control


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate one scenario file; a :class:`ScenarioError` names the file, the field and the problem."""
    path = Path(path)
    raw = load_mapping_file(path, what="scenario", error=ScenarioError)
    raw.setdefault("name", path.stem)
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {describe_validation_error(exc, model=Scenario)}") from exc
    return scenario.model_copy(update={"source": str(path)})


def bundled_scenario_paths() -> list[Path]:
    """Return the paths of the scenarios shipped with the package."""
    return sorted(BUNDLED_DIR.glob("**/*.yaml"))


def bundled_scenario_names() -> list[str]:
    """The names by which bundled scenarios can be given (their file stems)."""
    return [path.stem for path in bundled_scenario_paths()]


def scenario_files(entries: Sequence[str | Path] | None = None) -> list[Path]:
    """The scenario files that ``entries`` name: files, directories (searched for ``*.yaml``) or bundled names.

    None given means the bundled set; an entry that is neither an existing path nor a bundled name is a ScenarioError.
    """
    bundled = {path.stem: path for path in bundled_scenario_paths()}
    files: list[Path] = []
    for entry in entries or bundled_scenario_paths():
        path = Path(entry)
        if path.is_dir():
            files.extend(sorted(path.glob("**/*.yaml")))
        elif path.exists() or path.suffix or len(path.parts) > 1:
            files.append(path)  # a path: a missing one is reported when it is read
        elif str(entry) in bundled:
            files.append(bundled[str(entry)])
        else:
            close = difflib.get_close_matches(str(entry), list(bundled), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "'pipecat-harness simulate --list' shows them"
            raise ScenarioError(f"{entry}: no such scenario file and no bundled scenario of that name ({hint})")
    return files


def check_unique_names(scenarios: Sequence[Scenario]) -> None:
    """Refuse two scenarios with one name (their traces would overwrite each other); the error names both files."""
    seen: dict[str, str] = {}
    for scenario in scenarios:
        if scenario.name in seen:
            raise ScenarioError(
                f"{scenario.source}: field 'name': '{scenario.name}' is already used by {seen[scenario.name]}"
                "; rename one of them"
            )
        seen[scenario.name] = scenario.source


def load_scenarios(paths: Sequence[str | Path] | None = None) -> list[Scenario]:
    """Load scenario files, directories or bundled names (none given: the bundled set), checking names are unique."""
    scenarios = [load_scenario(f) for f in scenario_files(paths)]
    check_unique_names(scenarios)
    return scenarios
