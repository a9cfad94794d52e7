"""How the scripted model reads a request: which decision's condition holds, and the templates it fills."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipecat.processors.aggregators import async_tool_messages

from pipecat_harness.sim.model_script import TEMPLATE_PATTERN, DecisionCondition
from pipecat_harness.spoken import spoken_to_identifier, written_to_spoken

__all__ = ["FILTERS", "as_model_reads", "caller_view", "decision_matches", "message_text", "render_template"]


#: Template filter name -> what it does to the captured text.
FILTERS = {"identifier": spoken_to_identifier, "upper": lambda s: spoken_to_identifier(s).upper(),
           "lower": lambda s: spoken_to_identifier(s).lower(), "raw": lambda s: s.strip()}


def render_template(value: Any, variables: Mapping[str, str]) -> Any:
    """Fill ``{name}`` / ``{name|filter}`` placeholders in strings, lists and mappings (unknown names render empty)."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            raw = variables.get(match.group(1), "")
            return FILTERS.get(match.group(2) or "raw", FILTERS["raw"])(raw)

        return TEMPLATE_PATTERN.sub(substitute, value)
    if isinstance(value, list):
        return [render_template(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: render_template(v, variables) for k, v in value.items()}
    return value


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message (string content or the text parts of a content list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


# User turns a provider adapter adds on its own: Gemini's adapter copies the system instruction into a user turn when
# the context has no text message yet, and appends "." when the contents would end with a model turn.
_ADAPTER_FILLERS = {"."}


def caller_view(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The request's messages without the user turns the adapter made up (they are not the caller's)."""
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    made_up = {*_ADAPTER_FILLERS, system.strip()} if system else _ADAPTER_FILLERS
    return [dict(m) for m in messages if m.get("role") != "user" or message_text(m).strip() not in made_up]


def as_model_reads(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages with Pipecat's async-tool results read as the tool results they are.

    Pipecat delivers a result that arrives after the model moved on as a ``developer`` message carrying its async-tool
    payload, which Gemini's adapter sends as a user turn. A model reads either as that tool call's result, never as the
    caller's words.
    """
    read: list[Mapping[str, Any]] = []
    for message in messages:
        payload = None
        if message.get("role") in ("developer", "user", "system"):
            payload = async_tool_messages.parse_message({**message, "role": "developer"})  # type: ignore[arg-type]
        if payload is None or payload.kind == "started":
            read.append(message)
        else:
            content = payload.result if payload.result is not None else payload.description
            read.append({"role": "tool", "tool_call_id": payload.tool_call_id, "content": content})
    return read


def decision_matches(when: DecisionCondition, messages: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """Return template variables when ``when`` holds for ``messages``, else ``None``."""
    variables: dict[str, str] = {}
    users = [m for m in messages if m.get("role") == "user"]
    said = [message_text(m) for m in messages if m.get("role") == "assistant" and message_text(m)]
    if when.start is not None and when.start != (not users):
        return None
    if when.user is not None:
        match = _read_user_turn(when.user, message_text(users[-1])) if users else None
        if match is None:
            return None
        variables.update({k: v for k, v in match.groupdict().items() if v is not None})
    if when.tool is not None or when.result is not None:
        results = [content for name, content in _trailing_tool_results(messages) if when.tool in (None, name)]
        if not results or (when.result is not None and not _found(when.result, results)):
            return None
    system = "\n".join(message_text(m) for m in messages if m.get("role") == "system")
    holds = (
        when.said is None or _found(when.said, said),
        when.not_said is None or not _found(when.not_said, said),
        when.system is None or _found(when.system, [system]),
        when.last_said is None or _found(when.last_said, said[-1:]),
        when.note is None or _found(when.note, _recent_notes(messages)),
    )
    return variables if all(holds) else None


def _found(pattern: str, texts: Sequence[str]) -> bool:
    return any(re.search(pattern, text, re.IGNORECASE) for text in texts)


#: Punctuation a recogniser ends a stretch of speech with, or puts where the caller paused ("Yusuf Rossi.").
_PAUSE_MARKS = re.compile(r"[.,;:!?]+(?=\s|$)")
#: A literal comma (optional or not) before a space in a decision's pattern: the pause the script's author wrote.
_PATTERN_PAUSE = re.compile(r"(?<!\\),\??(?= )")


def _read_user_turn(pattern: str, text: str) -> re.Match[str] | None:
    """Match a decision's ``user`` pattern against a turn the way a model reads it.

    A model reads a recogniser's "W-4817. 420." as the words said, its punctuation as pauses: "Yusuf Rossi. zip code 1 9
    1 2 2." says "Yusuf Rossi, zip code one nine one two two". So the turn is tried as spoken words, as written, and as
    spoken words without pause marks against the pattern without its literal pause commas.
    """
    spoken = written_to_spoken(text)
    match = re.search(pattern, spoken, re.IGNORECASE) or re.search(pattern, text, re.IGNORECASE)
    if match is not None:
        return match
    unpunctuated = " ".join(_PAUSE_MARKS.sub(" ", spoken).split())
    return re.search(_PATTERN_PAUSE.sub("", pattern), unpunctuated, re.IGNORECASE)


def _recent_notes(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The developer notes since the newest assistant text, and the system instruction.

    The harness puts a note in the instruction when an LLM service carries it (Gemini reads a developer note as a turn).
    """
    since = itertools.takewhile(lambda m: not (m.get("role") == "assistant" and message_text(m)), reversed(messages))
    notes = [message_text(m) for m in messages[:1] if m.get("role") == "system"]
    return notes + [message_text(m) for m in since if m.get("role") == "developer"]


def _trailing_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Return ``(tool name, content)`` of the tool results since the last user or assistant text."""
    names = {call.get("id", ""): call.get("function", {}).get("name", "")
             for message in messages for call in message.get("tool_calls") or []}
    results: list[tuple[str, str]] = []
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            content = message.get("content")
            name = message.get("name") or names.get(message.get("tool_call_id", ""), "")
            results.append((str(name), content if isinstance(content, str) else json.dumps(content)))
        elif role == "user" or (role == "assistant" and message_text(message)):
            break
    return results
