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
           "load_scenario", "load_scenarios", "scenario_files"]

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
            raise ValueError("give the caller either as a script ('caller': its turns) or by goal ('caller_goal'), "
                             "exactly one of them")
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
            used += [(f"{where}{alternative}.tool_calls[{j}].name", call.name)
                     for alternative, action in actions for j, call in enumerate(action.tool_calls)]
            if decision.when.tool is not None:
                used.append((f"{where}.when.tool", decision.when.tool))
        used += [(f"faults[{i}].tool", fault.tool) for i, fault in enumerate(self.faults)]
        for where, name in used:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                listed = f"tools here: {', '.join(names)}" if names else "declare it under 'tools:'"
                hint = f"did you mean '{close[0]}'?" if close else listed
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
        return "pass" if self.control is None or self.control in active_controls else self.expect_without_control


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
    """The files ``entries`` name: files, directories of ``*.yaml``, bundled names (none: all); else a ScenarioError."""
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
            raise ScenarioError(f"{scenario.source}: field 'name': '{scenario.name}' is already used by "
                                f"{seen[scenario.name]}; rename one of them")
        seen[scenario.name] = scenario.source


def load_scenarios(paths: Sequence[str | Path] | None = None) -> list[Scenario]:
    """Load scenario files, directories or bundled names (none given: the bundled set), checking names are unique."""
    scenarios = [load_scenario(f) for f in scenario_files(paths)]
    check_unique_names(scenarios)
    return scenarios
