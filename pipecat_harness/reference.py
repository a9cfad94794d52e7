"""Reference pages generated from the models themselves, so they cannot drift from the code."""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["config_reference", "field_descriptions", "scenario_reference", "write_references"]

_SECTION = re.compile(r"^\s*(Parameters|Args|Attributes):\s*$")
_ITEM = re.compile(r"^(\s+)(\w+):\s*(.*)$")


def field_descriptions(model: type) -> dict[str, str]:
    """Field name -> description, read from the ``Parameters:``/``Args:`` section of the class docstring."""
    doc = inspect.getdoc(model) or ""
    descriptions: dict[str, str] = {}
    in_section = False
    current: str | None = None
    indent = None
    for line in doc.splitlines():
        if _SECTION.match(line):
            in_section, current, indent = True, None, None
            continue
        if not in_section:
            continue
        if line and not line.startswith(" "):
            in_section = False
            continue
        item = _ITEM.match(line)
        if item and (indent is None or len(item.group(1)) == indent):
            indent = len(item.group(1))
            current = item.group(2)
            descriptions[current] = item.group(3).strip()
        elif current and line.strip():
            descriptions[current] += " " + line.strip()
    for name, comment in _attribute_comments(model).items():
        descriptions.setdefault(name, comment)
    return descriptions


def _attribute_comments(model: type) -> dict[str, str]:
    """Field name -> its ``#:`` comment (the lines right above the field, Sphinx style)."""
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        field = re.match(r"^\s+(\w+)\s*:", line)
        if field and pending:
            comments[field.group(1)] = " ".join(pending)
        pending = []
    return comments


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{json.dumps(a)}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        null = " or null" if type(None) in args else ""
        return " or ".join(_type_name(a) for a in args if a is not type(None)) + null
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}" if args else "mapping"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "(its defaults)"
    return f"`{json.dumps(value, default=str)}`"


_CONSTRAINT_SYMBOLS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "min length",
                       "max_length": "max length", "pattern": "pattern"}


def _constraints(field: FieldInfo) -> str:
    parts = [f"{symbol} {getattr(meta, name)}" for meta in field.metadata
             for name, symbol in _CONSTRAINT_SYMBOLS.items() if getattr(meta, name, None) is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _model_section(model: type[BaseModel], *, heading: str, env_prefix: str | None, examples: dict[str, str]) -> str:
    descriptions = field_descriptions(model)
    header = f"| field | type | default | {'environment variable' if env_prefix else 'example'} | what it does |"
    summary = (inspect.getdoc(model) or "").split("\n\n", 1)[0].replace("\n", " ").strip()
    lines = [f"### {heading}", "", summary, "", header, "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        fourth = f"`{env_prefix}{name.upper()}`" if env_prefix else examples.get(f"{model.__name__}.{name}", "")
        description = (descriptions.get(name) or field.description or "").replace("|", "\\|")
        kind = f"{_type_name(field.annotation)}{_constraints(field)}"
        lines.append(f"| `{name}` | {kind} | {_default(field)} | {fourth} | {description} |")
    return "\n".join(lines) + "\n"


def config_reference() -> str:
    """The configuration reference as Markdown: every block and field of ``HarnessConfig``."""
    from pipecat_harness.config import HarnessConfig

    lines = ["| setting | type | default | environment variable |", "|---|---|---|---|"]
    sections = []
    for name, field in HarnessConfig.model_fields.items():
        nested = _nested_models(field.annotation)
        env = f"PIPECAT_HARNESS_{name.upper()}"
        if nested:
            heading = f"`{name}` — {nested[0].__name__}"
            sections.append(_model_section(nested[0], heading=heading, env_prefix=f"{env}__", examples={}))
        else:
            lines.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | `{env}` |")
    sections.insert(0, "\n".join(lines) + "\n")
    return (
        "# Configuration reference\n\n"
        "<!-- Generated by `python -m pipecat_harness.reference docs` from HarnessConfig; do not edit. -->\n\n"
        "`HarnessConfig` has one block per control plus `trace`. Values come from keyword arguments, then "
        "environment variables (`PIPECAT_HARNESS_<BLOCK>__<FIELD>`), then the YAML file given to "
        "`HarnessConfig.from_yaml` (`domain:` in the file selects a preset first). Every block rejects unknown "
        "fields; a bad value is reported as one sentence naming the setting (and the environment variable it "
        "came from). Settings that take a file also take a bundled name (`bundled:retail`).\n\n"
        "```yaml\n# harness.yaml\ndomain: airline\ntool_gate:\n  ledger_url: sqlite+aiosqlite:///ledger.db\n"
        "grader:\n  enabled: true\n  constraints_path: bundled:retail\n```\n\n" + "\n".join(sections)
    )


#: Examples for the scenario reference, by ``Model.field``.
SCENARIO_EXAMPLES: dict[str, str] = {
    "Scenario.name": "`duplicate_refund`", "Scenario.description": "`The caller asks twice for one refund.`",
    "Scenario.domain": "`airline`", "Scenario.control": "`tool_gate`", "Scenario.expect_without_control": "`fail`",
    "Scenario.tags": "`[stay_out_of_the_way]`", "Scenario.max_call_secs": "`120`",
    "Scenario.own_tools": "see [ToolSpec](#toolspec)", "Scenario.tools": "`[retail, callbacks]`",
    "Scenario.harness": "`{call_state: {confirm_tools: [schedule_callback]}}`",
    "Scenario.database": "see [DatabaseSpec](#databasespec)", "Scenario.tts": "`{word_timestamps: true}`",
    "Scenario.caller_voice": "`{asr_format: deepgram}`", "Scenario.model": "see [ModelScript](#modelscript)",
    "Scenario.faults": "`[{tool: issue_refund, kind: hang}]`", "Scenario.caller": "see [CallerTurn](#callerturn)",
    "Scenario.caller_goal": "see [CallerGoal](#callergoal)", "Scenario.expect": "see [Expectations](#expectations)",
    "ModelScript.summary": "`The caller asked for a refund of order W2378156.`",
    "ModelScript.system": "`You are a helpful airline agent.`",
    "ModelScript.greeting": "`Thanks for calling. How can I help?`", "ModelScript.fallback": "`Could you repeat that?`",
    "ModelScript.decisions": "see [ModelDecision](#modeldecision)", "ModelScript.first_token_secs": "`0.6`",
    "ModelScript.token_secs": "`0.03`",
    "Expectations.context": '`{contains: ["W2378156"], summarized: true}`', "Expectations.caller_completed": "`false`",
    "Expectations.state": '`[{sql: "SELECT count(*) FROM refunds", equals: 1}]`',
    "Expectations.history": "`{max_unplayed_words: 0}`",
    "ContextCheck.contains": '`["W2378156"]`', "ContextCheck.max_tokens": "`4000`", "ContextCheck.summarized": "`true`",
    "ToolSpec.name": "`refund_fee`", "ToolSpec.write": "`true`",
    "ToolSpec.description": "`Refund a fee charged on a booking.`",
    "ToolSpec.parameters": "`{booking: {type: string}}`", "ToolSpec.required": "`[booking]`",
    "ToolSpec.sql": "`INSERT INTO fee_refunds (booking, amount_usd) VALUES (:booking, :amount_usd)`",
    "ToolSpec.python": "`my_tools.refunds:refund_fee`", "ToolSpec.result": "`{status: refunded}`",
    "DatabaseSpec.seed": "`empty`",
    "DatabaseSpec.tables": "`{bookings: {columns: {code: TEXT PRIMARY KEY}, rows: [{code: ABC123}]}}`",
    "DatabaseSpec.sql": "`[\"UPDATE orders SET status = 'pending'\"]`",
    "TableSpec.columns": "`{code: TEXT PRIMARY KEY, fee_usd: REAL}`",
    "TableSpec.rows": "`[{code: ABC123, fee_usd: 75}]`",
    "ModelDecision.say": "`Your order {order|identifier} is on its way.`",
    "ModelDecision.tool_calls": '`[{name: issue_refund, args: {order_id: "{order|identifier}"}}]`',
    "ModelDecision.times": "`2`", "ModelDecision.weight": "`8`",
    "ModelDecision.alternatives": '`[{say: "May I ask why you want both cancelled?", weight: 1}]`',
    "ModelDecision.when": '`{user: "refund"}`',
    "ModelAction.say": "`May I ask why you want both cancelled?`",
    "ModelAction.tool_calls": '`[{name: get_order_details, args: {order_id: "#W2378156"}}]`',
    "ModelAction.weight": "`1`",
    "DecisionCondition.system": "`retrieve the details`", "DecisionCondition.note": "`issue_refund.*went through`",
    "DecisionCondition.start": "`true`", "DecisionCondition.user": "`order (?P<order>.+)`",
    "DecisionCondition.tool": "`issue_refund`", "DecisionCondition.result": "`refunded`",
    "DecisionCondition.said": "`anything else`", "DecisionCondition.not_said": "`refund`",
    "DecisionCondition.last_said": "`confirm`",
    "ToolCallSpec.name": "`issue_refund`", "ToolCallSpec.args": '`{order_id: "#W2378156", amount_usd: 45}`',
    "CallerTurn.after": "`bot_started`", "CallerTurn.delay": "`2.5`", "CallerTurn.wait": "`20`",
    "CallerTurn.speech": '`[{say: "My order number is"}, {pause: 1.5}, {say: "W two three"}]`',
    "SpeechSegment.say": "`My order number is W two three`", "SpeechSegment.secs": "`2.0`",
    "SpeechSegment.asr": "`My order number is W 23`", "SpeechSegment.pause": "`1.2`", "SpeechSegment.silent": "`0.8`",
    "ToolFault.tool": "`issue_refund`", "ToolFault.kind": "`lost_reply`", "ToolFault.secs": "`12`",
    "ToolFault.occurrence": "`2`", "ToolFault.message": "`timeout talking to billing`",
    "StateCheck.sql": "`SELECT count(*) FROM refunds`", "StateCheck.equals": "`1`",
    "StateCheck.why": "`one refund, not two`",
    "HistoryCheck.max_unplayed_words": "`0`", "HistoryCheck.max_removed_words": "`1`",
    "HistoryCheck.max_repeated_replies": "`0`",
    "TTSSpec.word_timestamps": "`true`", "TTSSpec.words_per_minute": "`180`", "TTSSpec.first_audio_secs": "`0.35`",
    "CallerSpec.words_per_minute": "`120`", "CallerSpec.asr_final_secs": "`0.5`",
    "CallerSpec.interim_every_words": "`3`", "CallerSpec.asr_format": "`deepgram`", "CallerSpec.final_pieces": "`2`",
    "CallerSpec.finalize_delay_secs": "`0.2`", "CallerSpec.stt_p99_secs": "`0.8`",
    "CallerGoal.persona": "`A retired teacher, polite, a little hard of hearing.`",
    "CallerGoal.reason": "`The thermostat from my last order arrived broken and I want a refund.`",
    "CallerGoal.knows": '`[{what: order number, say: "W two three seven ... eight one five six"}]`',
    "CallerGoal.does_not_know": "`[the card the order was paid with]`", "CallerGoal.interrupts": "`{after_secs: 4}`",
    "CallerGoal.done_when": "`anything else|goodbye`", "CallerGoal.reply_delay_secs": "`1.0`",
    "CallerGoal.pause_secs": "`1.5`", "CallerGoal.max_turns": "`6`", "CallerGoal.wait_secs": "`20`",
    "KnownFact.what": "`order number`", "KnownFact.say": "`W two three seven ... eight one five six`",
    "KnownFact.asked_as": "`order (?:number|id)`",
    "Interruptions.after_secs": "`4`",
}


def _all_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen = [root]
    for model in seen:  # breadth first: the list grows as it is read
        nested = (m for field in model.model_fields.values() for m in _nested_models(field.annotation))
        seen.extend(m for m in dict.fromkeys(nested) if m not in seen)
    return seen


def scenario_reference() -> str:
    """The scenario reference as Markdown: every model a scenario file uses, field by field."""
    from pipecat_harness.sim.scenario import Scenario

    sections = [_model_section(model, heading=model.__name__, env_prefix=None, examples=SCENARIO_EXAMPLES)
                for model in _all_models(Scenario)]
    return (
        "# Scenario reference\n\n"
        "<!-- Generated by `python -m pipecat_harness.reference docs` from the scenario model; do not edit. -->\n\n"
        "A scenario is a YAML file run by `pipecat-harness simulate FILE` (and `eval`). Every mapping rejects "
        "unknown keys; tool names, template groups and control names are checked when the file loads, and each "
        "problem is reported as one sentence naming the file and the field. The top level is a "
        "[Scenario](#scenario); see the README's *Write your own scenario* for a complete example with its own "
        "tools and tables.\n\n" + "\n".join(sections)
    )


def write_references(directory: str | Path) -> list[Path]:
    """Write ``configuration.md`` and ``scenarios.md`` into ``directory`` and return their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pages = {directory / "configuration.md": config_reference(), directory / "scenarios.md": scenario_reference()}
    for path, text in pages.items():
        path.write_text(text, encoding="utf-8")
    return list(pages)


if __name__ == "__main__":
    for written in write_references(sys.argv[1] if len(sys.argv) > 1 else "docs"):
        print(written)
