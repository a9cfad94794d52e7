"""A scripted LLM service that answers from a scenario's decisions.

It subclasses Pipecat's ``LLMService`` and goes through the same paths as a
provider service: ``LLMFullResponseStartFrame``, streamed ``LLMTextFrame``s,
``run_function_calls`` for tool calls (so ``FunctionCallInProgressFrame``,
handler execution, ``FunctionCallResultFrame`` and the re-run of the model all
happen as in production), then ``LLMFullResponseEndFrame``.

Which decision fires depends on what the model actually received: the newest
user message, the newest tool results and the assistant history. A turn that
reaches the model mid-identifier therefore produces a truncated lookup, and a
history that lost what was said produces repeated speech.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
)
from pipecat.processors.aggregators import async_tool_messages
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallFromLLM, LLMService
from pipecat.services.settings import LLMSettings

from pipecat_harness.sim.model_script import TEMPLATE_PATTERN, DecisionCondition, ModelDecision, ModelScript
from pipecat_harness.spoken import spoken_to_identifier, written_to_spoken

__all__ = ["ModelCall", "ScriptedChatModel", "ScriptedLLMService", "ScriptedModel", "render_template", "text_tokens"]

_TEMPLATE = TEMPLATE_PATTERN
_FILTERS = {
    "identifier": spoken_to_identifier,
    "upper": lambda s: spoken_to_identifier(s).upper(),
    "lower": lambda s: spoken_to_identifier(s).lower(),
    "raw": lambda s: s.strip(),
}


def render_template(value: Any, variables: Mapping[str, str]) -> Any:
    """Fill ``{name}`` / ``{name|filter}`` placeholders in strings, lists and mappings.

    A string that is exactly one placeholder keeps the filter's result type;
    unknown variables render as an empty string (what a model that heard
    nothing would pass).
    """
    if isinstance(value, str):
        def substitute(match: re.Match[str]) -> str:
            raw = variables.get(match.group(1), "")
            return _FILTERS.get(match.group(2) or "raw", _FILTERS["raw"])(raw)

        return _TEMPLATE.sub(substitute, value)
    if isinstance(value, list):
        return [render_template(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: render_template(v, variables) for k, v in value.items()}
    return value


@dataclass
class ModelCall:
    """One call of the scripted model: what it received and what it decided.

    Parameters:
        messages: What the model received, as OpenAI-shaped messages.
        decision_index: The decision that fired (``None``: the fallback, or not decided yet).
        text: The text streamed so far.
        tool_calls: ``{"id", "name", "arguments"}`` of the calls it made.
        completed: Whether the reply was streamed to its end.
        planned_text: The whole reply text decided on.
    """

    messages: list[dict[str, Any]]
    decision_index: int | None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    completed: bool = False
    planned_text: str = ""


def context_messages(context: LLMContext) -> list[dict[str, Any]]:
    """The context's OpenAI-shaped messages as plain dictionaries (provider-specific ones skipped)."""
    return [dict(m) for m in context.get_messages() if isinstance(m, Mapping)]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message (string content or the text parts of a content list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


class ScriptedModel:
    """The decisions of a :class:`ModelScript`, applied to what a model received.

    Shared by :class:`ScriptedLLMService` (inside the pipeline) and the
    provider protocol fakes (:mod:`pipecat_harness.fakes`), which convert the
    provider-format request they received into OpenAI-shaped messages first.

    Args:
        script: The scenario's model script.
        seed: Sample the decisions' alternatives with this seed (``None``: always a decision's own action).
    """

    def __init__(self, script: ModelScript, *, seed: int | str | None = None) -> None:
        self.script = script
        self._random = random.Random(seed) if seed is not None else None
        decisions = list(script.decisions)
        if script.greeting:
            decisions.insert(0, ModelDecision(when=DecisionCondition(start=True), say=script.greeting))
        self._decisions = decisions
        self._fired = [0] * len(decisions)
        self._call_ids = itertools.count(1)
        self.calls: list[ModelCall] = []
        self.summary_requests: list[dict[str, Any]] = []

    def received(self, messages: Sequence[Mapping[str, Any]]) -> ModelCall:
        """Record a model call with what it received (the decision comes later, see :meth:`decide`)."""
        call = ModelCall(messages=copy.deepcopy([dict(m) for m in messages]), decision_index=None)
        self.calls.append(call)
        return call

    def decide(self, call: ModelCall) -> None:
        """Choose the decision for ``call`` and fill in its text and tool calls (ids included)."""
        index, variables = self._choose(call.messages)
        call.decision_index = index
        decision = self._decisions[index] if index is not None else None
        action = decision.actions()[0] if decision else None
        if decision is not None and decision.alternatives and self._random is not None:
            actions = decision.actions()
            action = self._random.choices(actions, weights=[a.weight for a in actions])[0]
        text = action.say if action else self.script.fallback
        if index is not None:
            self._fired[index] += 1
        call.planned_text = render_template(text, variables) if text else ""
        for spec in action.tool_calls if action else []:
            call.tool_calls.append({"id": f"call_{next(self._call_ids):04d}", "name": spec.name,
                                    "arguments": render_template(spec.args, variables)})

    def summarise(self, messages: Sequence[Mapping[str, Any]], *, system_instruction: str | None,
                  max_tokens: int | None) -> str | None:
        """Answer an out-of-band inference (Pipecat's context summarisation) with the script's summary."""
        self.summary_requests.append({"system_instruction": system_instruction, "max_tokens": max_tokens,
                                      "messages": [dict(m) for m in messages]})
        return self.script.summary

    def _choose(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int | None, dict[str, str]]:
        messages = _as_model_reads(messages)
        for index, decision in enumerate(self._decisions):
            if self._fired[index] >= decision.times:
                continue
            variables = _matches(decision.when, messages)
            if variables is not None:
                return index, variables
        return None, {}


class ScriptedChatModel(ScriptedModel):
    """The scripted model behind a provider fake (a :class:`~pipecat_harness.fakes.ChatModel`).

    It decides from the provider-format request the fake received, converted
    to OpenAI-shaped messages, after the script's first-token latency (a
    request abandoned while "thinking" consumes no decision).
    """

    def __init__(self, script: ModelScript, *, seed: int | str | None = None) -> None:
        super().__init__(script, seed=seed)
        self._replies: list[tuple[ModelCall, Any]] = []

    async def reply(self, request: Any) -> Any:
        """Answer a :class:`~pipecat_harness.fakes.ChatRequest` with a :class:`~pipecat_harness.fakes.ChatReply`."""
        from pipecat_harness.fakes.chat import ChatReply

        if not request.streaming:
            # Pipecat streams every model run of the conversation; only its
            # out-of-band inference (run_inference: context summarisation)
            # asks for a whole response, as the scripted service answers it.
            summary = self.summarise(request.messages[1:] if request.system else request.messages,
                                     system_instruction=request.system or None, max_tokens=request.max_tokens)
            return ChatReply(text=summary or "")
        call = self.received(_caller_view(request.messages))
        await asyncio.sleep(self.script.first_token_secs)
        self.decide(call)
        reply = ChatReply(text=call.planned_text, tool_calls=[dict(c) for c in call.tool_calls],
                          token_secs=self.script.token_secs)
        self._replies.append((call, reply))
        return reply

    def sync(self) -> list[ModelCall]:
        """Copy what the fake actually streamed into the calls; returns every call."""
        for call, reply in self._replies:
            call.text = reply.sent_text
            call.completed = reply.completed
        return self.calls


# User turns a provider adapter adds on its own: Gemini's adapter copies the
# system instruction into a user turn when the context has no text message
# yet, and appends "." when the contents would end with a model turn.
_ADAPTER_FILLERS = {"."}


def _caller_view(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The request's messages without the user turns the adapter made up (they are not the caller's)."""
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    kept = []
    for message in messages:
        text = message_text(message).strip()
        if message.get("role") == "user" and (text in _ADAPTER_FILLERS or (system and text == system.strip())):
            continue
        kept.append(dict(message))
    return kept


def text_tokens(text: str) -> list[str]:
    """The streamed pieces of a reply: each word with the whitespace after it."""
    return re.findall(r"\S+\s*", text)


class ScriptedLLMService(LLMService):
    """An ``LLMService`` whose replies come from a :class:`ModelScript`.

    What the model "received" on each run is what an OpenAI-format provider
    would: the service's system instruction as a leading system message,
    then the context's messages.

    Args:
        script: The scenario's model script.
        system_instruction: The system prompt (as a bot sets it on its LLM service).
        seed: Sample the decisions' alternatives with this seed (``None``: always a decision's own action).
        **kwargs: Passed to ``LLMService`` (``run_in_parallel``, ``function_call_timeout_secs``...).
    """

    def __init__(self, script: ModelScript, *, system_instruction: str | None = None, seed: int | str | None = None,
                 **kwargs: Any) -> None:
        settings = LLMSettings(
            model="scripted", extra={}, system_instruction=system_instruction, temperature=None, max_tokens=None,
            top_p=None, top_k=None, frequency_penalty=None, presence_penalty=None, seed=None,
            filter_incomplete_user_turns=False, user_turn_completion_config=None,
            use_provider_thinking_default=False,
        )
        super().__init__(settings=settings, **kwargs)
        self._script = script
        self.model = ScriptedModel(script, seed=seed)

    @property
    def calls(self) -> list[ModelCall]:
        """Every model call, in order."""
        return self.model.calls

    @property
    def summary_requests(self) -> list[dict[str, Any]]:
        """Every out-of-band inference (context summarisation), in order."""
        return self.model.summary_requests

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Answer ``LLMContextFrame``s from the script; pass everything else on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.push_frame(LLMFullResponseStartFrame())
            try:
                await self._respond(frame.context)
            finally:
                await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)

    async def run_inference(
        self,
        context: LLMContext,
        max_tokens: int | None = None,
        system_instruction: str | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> str | None:
        """Out-of-band inference (Pipecat's context summarisation): the script's summary."""
        return self.model.summarise(context_messages(context), system_instruction=system_instruction,
                                    max_tokens=max_tokens)

    async def _respond(self, context: LLMContext) -> None:
        messages = context_messages(context)
        instruction = self._settings.system_instruction
        if isinstance(instruction, str) and instruction:
            messages.insert(0, {"role": "system", "content": instruction})
        call = self.model.received(messages)
        await asyncio.sleep(self._script.first_token_secs)
        # Chosen only once the first token is due: a generation interrupted
        # while "thinking" consumes nothing and issues no tool call.
        self.model.decide(call)
        for token in text_tokens(call.planned_text):
            await self._push_llm_text(token)
            call.text += token
            if self._script.token_secs:
                await asyncio.sleep(self._script.token_secs)
        if call.tool_calls:
            await self.run_function_calls([
                FunctionCallFromLLM(function_name=spec["name"], tool_call_id=spec["id"], arguments=spec["arguments"],
                                    context=context)
                for spec in call.tool_calls
            ])
        call.completed = True


def _as_model_reads(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages with Pipecat's async-tool results read as the tool results they are.

    Pipecat delivers a result that arrives after the model moved on as a
    ``developer`` message carrying its async-tool payload, which Gemini's
    adapter sends as a user turn. A model reads either as that tool call's
    result, never as the caller's words.
    """
    read: list[Mapping[str, Any]] = []
    for message in messages:
        payload = None
        if message.get("role") in ("developer", "user", "system"):
            payload = async_tool_messages.parse_message({**message, "role": "developer"})  # type: ignore[arg-type]
        if payload is None or payload.kind == "started":
            read.append(message)
        else:
            read.append({"role": "tool", "tool_call_id": payload.tool_call_id,
                         "content": payload.result if payload.result is not None else payload.description})
    return read


def _matches(when: DecisionCondition, messages: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """Return template variables when ``when`` holds for ``messages``, else ``None``."""
    variables: dict[str, str] = {}
    users = [m for m in messages if m.get("role") == "user"]
    assistant_texts = [message_text(m) for m in messages if m.get("role") == "assistant" and message_text(m)]
    if when.start is not None and when.start != (not users):
        return None
    if when.user is not None:
        if not users:
            return None
        text = message_text(users[-1])
        # A model reads a recogniser's "W-4817. 420." as the words the caller said.
        match = re.search(when.user, written_to_spoken(text), re.IGNORECASE) or re.search(
            when.user, text, re.IGNORECASE)
        if match is None:
            return None
        variables.update({k: v for k, v in match.groupdict().items() if v is not None})
    if when.tool is not None or when.result is not None:
        results = _trailing_tool_results(messages)
        if when.tool is not None:
            results = [(name, content) for name, content in results if name == when.tool]
        if not results:
            return None
        if when.result is not None and not any(re.search(when.result, c, re.IGNORECASE) for _, c in results):
            return None
    if when.said is not None and not any(re.search(when.said, t, re.IGNORECASE) for t in assistant_texts):
        return None
    if when.not_said is not None and any(re.search(when.not_said, t, re.IGNORECASE) for t in assistant_texts):
        return None
    if when.system is not None:
        system = "\n".join(message_text(m) for m in messages if m.get("role") == "system")
        if not re.search(when.system, system, re.IGNORECASE):
            return None
    if when.last_said is not None and not (
        assistant_texts and re.search(when.last_said, assistant_texts[-1], re.IGNORECASE)
    ):
        return None
    if when.note is not None and not any(re.search(when.note, t, re.IGNORECASE) for t in _recent_notes(messages)):
        return None
    return variables


def _recent_notes(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the model was told outside the conversation since it last spoke.

    The developer notes added since the newest assistant text, and the system
    instruction, where the harness puts a note for the generation it concerns
    when an LLM service is there to carry it (Gemini would read a developer
    note as a caller turn).
    """
    notes: list[str] = [message_text(m) for m in messages[:1] if m.get("role") == "system"]
    for message in reversed(messages):
        role = message.get("role")
        if role == "assistant" and message_text(message):
            break
        if role == "developer":
            notes.append(message_text(message))
    return notes


def _trailing_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Return ``(tool name, content)`` of the tool results since the last user or assistant text."""
    names: dict[str, str] = {}
    for message in messages:
        for tool_call in message.get("tool_calls") or []:
            names[tool_call.get("id", "")] = tool_call.get("function", {}).get("name", "")
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
